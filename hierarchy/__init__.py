"""The knowledge base and ingestion: documents in, chunks, summary layers, stores; above the floor."""
