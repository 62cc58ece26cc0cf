//! The `data-sync` Lambda function (filled in by its own issue).

fn main() {}
