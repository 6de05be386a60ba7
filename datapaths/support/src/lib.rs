//! What both datapaths' loaders and shims share.

pub mod mapped;
