//! The library's own route function, `member-loans` (`[routes.member-loans]` in `model.toml`):
//! `GET /members/{memberId}/loans` ([`library::member_loans`]), served by its operation id.

#[tokio::main]
async fn main() -> Result<(), cqrs_routes::Error> {
    cqrs_routes::Routes::new(library::MODEL, "member-loans")?
        .on("memberLoans", library::member_loans)?
        .run()
        .await
}
