"""Layer 4: HMM taggers as transducers."""
