"""Ingestion: read documents (JSON Lines or a folder of text files), validate them, chunk them."""
