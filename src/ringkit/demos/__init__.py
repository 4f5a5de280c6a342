"""Demos: scenarios run on real servers and told as a story (``ringkit demo``)."""
