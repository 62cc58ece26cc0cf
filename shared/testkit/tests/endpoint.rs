//! Pure tests of the local-only endpoint check.

use cqrs_testkit::endpoint::{EndpointError, check_local_endpoint};

#[test]
fn local_endpoints_are_accepted() {
    for url in [
        "http://127.0.0.1:8000",
        "http://127.0.0.1:8000/",
        "http://localhost:1",
        "http://LOCALHOST",
        "https://127.0.0.1:4443",
    ] {
        assert_eq!(check_local_endpoint(url), Ok(()), "{url}");
    }
}

#[test]
fn everything_else_is_refused() {
    for url in [
        "https://dynamodb.us-east-1.amazonaws.com",
        "http://127.0.0.1.nip.io:8000",
        "http://10.0.0.1:8000",
        "http://0.0.0.0:8000",
        "http://localhost@example.com:8000",
        "http://[::1]:8000",
    ] {
        assert!(
            matches!(check_local_endpoint(url), Err(EndpointError::NotLocal(_))),
            "{url}"
        );
    }
    for url in [
        "127.0.0.1:8000",
        "ftp://127.0.0.1",
        "http://127.0.0.1:port",
        "http://127.0.0.1:",
        "http://127.0.0.1:8000/path",
        "http://127.0.0.1:8000?x=1",
    ] {
        assert!(
            matches!(check_local_endpoint(url), Err(EndpointError::Malformed(_))),
            "{url}"
        );
    }
}

#[test]
fn unset_message_says_how_to_run_the_tests() {
    let message = EndpointError::Unset.to_string();
    assert!(message.contains("AWS_ENDPOINT_URL_DYNAMODB"), "{message}");
    assert!(message.contains("make test"), "{message}");
}
