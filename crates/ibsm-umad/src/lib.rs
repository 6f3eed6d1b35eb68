//! ibsm-umad: placeholder, see ARCHITECTURE.md.
