//! Typed entities: a Rust type that stands for one entity of the model, so that code reads a
//! version's attributes as fields (`loan.member_id`) instead of untyped JSON.
//!
//! A typed entity is a serde type whose fields are the entity's attributes (camelCase, as they
//! are stored) and which names its entity through [`TypedEntity::ENTITY`]. `cqrs model rust`
//! generates these types from `model.toml`; a hand-written one works the same way. The command
//! handler's hooks read them with `HookCommand::typed` and write them with `HookCommand::set_typed`,
//! and refuse a type of another entity than the hook's.
//!
//! ```
//! use cqrs_item::TypedEntity;
//!
//! #[derive(serde::Deserialize)]
//! #[serde(rename_all = "camelCase")]
//! struct Member {
//!     member_id: String,
//! }
//!
//! impl TypedEntity for Member {
//!     const ENTITY: &'static str = "member";
//! }
//!
//! assert_eq!(Member::ENTITY, "member");
//! let member: Member = serde_json::from_str(r#"{"memberId": "m1", "other": 1}"#).unwrap();
//! assert_eq!(member.member_id, "m1");
//! ```

/// A Rust type for the attributes of one entity of the model, named by [`TypedEntity::ENTITY`]
/// (see the [module docs](self)).
///
/// ```
/// struct Loan;
/// impl cqrs_item::TypedEntity for Loan {
///     const ENTITY: &'static str = "loan";
/// }
/// fn entity_of<T: cqrs_item::TypedEntity>() -> &'static str {
///     T::ENTITY
/// }
/// assert_eq!(entity_of::<Loan>(), "loan");
/// ```
pub trait TypedEntity {
    /// The name of the entity in the model (`[entities.<name>]`).
    const ENTITY: &'static str;
}
