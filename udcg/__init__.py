"""udcg: utility- and distraction-aware retrieval evaluation for RAG."""

__version__ = "0.1.0"
