//! ibsm-sim: placeholder, see ARCHITECTURE.md.
