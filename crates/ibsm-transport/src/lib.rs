//! ibsm-transport: placeholder, see ARCHITECTURE.md.
