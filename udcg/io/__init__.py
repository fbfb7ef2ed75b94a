"""Files and data sets: JSON/JSONL with located errors, the resumable cache, the authors' format,
contexts files, TREC runs and qrels, BEIR folders, Hugging Face datasets, the data-set loaders."""
