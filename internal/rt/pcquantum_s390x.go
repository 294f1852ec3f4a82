package rt

// pcQuantum is the minimal instruction size (internal/goarch.PCQuantum).
const pcQuantum = 2
