//! The `query-handler` Lambda function (filled in by its own issue).

fn main() {}
