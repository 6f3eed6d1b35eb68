//! ibsm-mad: placeholder, see ARCHITECTURE.md.
