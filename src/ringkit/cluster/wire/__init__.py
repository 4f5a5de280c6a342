"""The wire: how the cache client talks to each kind of server, fenced by the view's epoch.

One module or folder per concern below the client: server URLs and credentials, the embedded
``memory://`` store, the blocking and asyncio backends, the fence every call passes through, the
per-server key index and, in ``redis/``, the Lua that Redis runs for the fence and the handoff.
"""
