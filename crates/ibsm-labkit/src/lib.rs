//! ibsm-labkit: placeholder, see ARCHITECTURE.md.
