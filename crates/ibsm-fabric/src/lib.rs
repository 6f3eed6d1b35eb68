//! ibsm-fabric: placeholder, see ARCHITECTURE.md.
