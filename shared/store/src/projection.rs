//! data-sync projection writes (being written).
