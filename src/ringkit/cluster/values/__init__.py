"""Values: what the cache client stores: keys, the value codec, TTLs and a move's packed page."""
