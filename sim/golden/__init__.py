"""Golden models: what the hardware must compute, bit for bit."""
