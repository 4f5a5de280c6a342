"""Redis's side of the wire: the Lua scripts of the fence, the hints and the hot-key copies."""
