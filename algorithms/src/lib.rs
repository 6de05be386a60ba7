//! Congestion-control algorithms.
