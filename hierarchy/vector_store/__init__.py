"""The vector-store seam: the one way the knowledge base reaches its chunk vectors for search.

base.py holds the protocol and the store spec (what `logicroute index --store` names and the
manifest remembers); faiss_store.py and milvus_store.py are the backends; open.py picks one.
Backends import their engines (faiss, pymilvus) lazily, so importing the seam costs nothing."""
