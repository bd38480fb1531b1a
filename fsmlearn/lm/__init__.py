"""Layer 4: backoff n-gram language models as failure-arc acceptors."""
