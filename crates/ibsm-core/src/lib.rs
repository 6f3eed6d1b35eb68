//! ibsm-core: placeholder, see ARCHITECTURE.md.
