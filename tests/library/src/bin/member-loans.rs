//! The library's own route function, `member-loans` (`[routes.member-loans]` in `model.toml`):
//! `GET /members/{memberId}/loans` ([`library::member_loans`]), served by its operation id.

fn main() -> Result<(), cqrs_dynamo::Error> {
    cqrs_dynamo::run::routes::<library::Library>("member-loans", |routes| {
        routes.on("memberLoans", library::member_loans)
    })
}
