//! Command hooks: a service's own rules on the commands of an entity, written in Rust.
//!
//! A hook ([`CommandHook`]) is registered for one entity of the service's model ([`Hooks::on`]). It
//! runs for every `POST` and `PATCH` of that entity after the model's checks (the version rules,
//! the attributes, the tenant) and before the write, and sees the caller, the new version and the
//! version it builds on ([`HookCommand::stored`], read only when the command needs it anyway: a
//! create stays one round trip). It may:
//!
//! - **refuse** the command with a problem document of its choosing ([`ApiError::refused`], with
//!   one of the statuses the HTTP contract documents for commands, [`cqrs_problem::REFUSAL_STATUSES`]);
//!   nothing is written;
//! - **adjust attributes** ([`HookCommand::set_attribute`], [`HookCommand::remove_attribute`]);
//!   the model checks the item again and computes its index keys again afterwards;
//! - **guard** the write with conditions of the same transaction ([`HookCommand::counter`],
//!   [`HookCommand::guard`]): a rule across items read through an index is racy, a guard is not.
//!   When a guard does not hold, nothing is written and the caller gets the refusal the hook gave
//!   with it. Counters of one name are one guard (their deltas summed, the tightest `at_most` kept
//!   with its refusal); a command takes at most [`MAX_GUARDS`] (97) guards after that, DynamoDB's
//!   100 transaction items less the 3 the command writes itself (its version row, its head, its
//!   idempotency record, counted with or without an `Idempotency-Key`), and no guard on one of
//!   those three items nor two on one item: otherwise the hook is at fault, a 500 whose logged
//!   detail names the hook's entity and the guard ([`cqrs_store::guard::prepare`]).
//!
//! A hook cannot change the keys, the tenant, the version or the audit fields: it sees them read
//! only, and an attribute change that would move the item's `pk` or `sk` is refused as a fault of
//! the hook (500). Its error writes nothing. A command that retries for the latest version
//! (`version: -1`) runs the hook once per attempt.
//!
//! A hook's refusal of a request that carries an `Idempotency-Key` is answered only once the key's
//! record says that no earlier request with it was written: a retry of a written command gets the
//! first answer (its replay), even when the hook would refuse it now.
//!
//! ```
//! use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
//! use cqrs_problem::ApiError;
//!
//! /// A member on the basic tier holds at most 3 loans out.
//! struct LoanRules;
//!
//! impl CommandHook for LoanRules {
//!     fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
//!         Box::pin(async move {
//!             let member = command.attribute("memberId").and_then(|v| v.as_str()).unwrap_or_default().to_string();
//!             if command.is_create() {
//!                 let full = ApiError::refused(409, "urn:library:loan-limit", "Loan limit", format!("member {member} holds 3 loans"));
//!                 command.counter(&format!("loans#{member}"), 1, 3, full)?;
//!             }
//!             Ok(())
//!         })
//!     }
//! }
//!
//! let hooks = Hooks::new().on("loan", LoanRules);
//! assert!(hooks.get("loan").is_some());
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use aws_sdk_dynamodb::types::TransactWriteItem;
use cqrs_caller::Caller;
use cqrs_item::{Item, Value};
use cqrs_problem::ApiError;
use cqrs_store::Store;
use cqrs_store::guard::Guard;
pub use cqrs_store::guard::MAX_GUARDS;

/// What [`CommandHook::before_write`] returns: `Ok` lets the command go on (with what the hook
/// adjusted and the guards it added), an error is the caller's answer and nothing is written.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send + 'a>>;

/// A service's rule on the commands of one entity; see the [module docs](self).
pub trait CommandHook: Send + Sync + 'static {
    /// Runs after the model's checks and before the write of `command`'s new version.
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a>;
}

/// The service's hooks, by entity name.
///
/// ```
/// let hooks = cqrs_command_handler::hooks::Hooks::new();
/// assert!(hooks.get("order").is_none());
/// assert!(hooks.is_empty());
/// ```
#[derive(Clone, Default)]
pub struct Hooks {
    by_entity: HashMap<String, Arc<dyn CommandHook>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.by_entity.keys().collect();
        names.sort();
        f.debug_struct("Hooks").field("entities", &names).finish()
    }
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Hooks::default()
    }

    /// `hook` on the commands of `entity` (one hook per entity: a second replaces the first).
    /// [`check`](Hooks::check) says whether every entity named is in the model.
    pub fn on(mut self, entity: impl Into<String>, hook: impl CommandHook) -> Self {
        self.by_entity.insert(entity.into(), Arc::new(hook));
        self
    }

    /// The hook of `entity`, if there is one.
    pub fn get(&self, entity: &str) -> Option<&dyn CommandHook> {
        self.by_entity.get(entity).map(|hook| hook.as_ref())
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.by_entity.is_empty()
    }

    /// Every entity a hook is registered for is an entity of `model`; else the names that are
    /// not (a typo would leave a rule silently unapplied).
    ///
    /// ```
    /// # use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
    /// # struct Nothing;
    /// # impl CommandHook for Nothing {
    /// #     fn before_write<'a>(&'a self, _: &'a mut HookCommand<'_>) -> HookFuture<'a> { Box::pin(async { Ok(()) }) }
    /// # }
    /// let model = cqrs_model::Model::example();
    /// assert!(Hooks::new().on("order", Nothing).check(&model).is_ok());
    /// assert!(Hooks::new().on("ordr", Nothing).check(&model).is_err());
    /// ```
    pub fn check(&self, model: &cqrs_model::Model) -> Result<(), String> {
        let mut unknown: Vec<&str> = self
            .by_entity
            .keys()
            .filter(|name| model.entity(name).is_none())
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        unknown.sort_unstable();
        Err(format!(
            "command hooks registered for entities the model does not have: {}",
            unknown.join(", ")
        ))
    }
}

/// The command a hook sees: the caller, the new version (its attributes may be adjusted), the
/// version it builds on, and the guards the hook adds to the write.
pub struct HookCommand<'a> {
    caller: &'a Caller,
    store: &'a Store,
    item: &'a mut Item,
    stored: Option<&'a Item>,
    guards: Vec<(Guard, ApiError)>,
}

impl fmt::Debug for HookCommand<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HookCommand")
            .field("id", &self.item.id)
            .field("version", &self.item.version)
            .field("guards", &self.guards.len())
            .finish()
    }
}

impl<'a> HookCommand<'a> {
    /// The command of `caller` writing `item` on top of `stored` (tests of a service's hooks build
    /// one this way; the command handler does for every command of a hooked entity).
    ///
    /// ```
    /// # async fn demo(store: cqrs_store::Store) {
    /// let caller = cqrs_caller::Caller::new("u1", "t1", vec![]);
    /// let mut item = cqrs_item::Item::example();
    /// let command = cqrs_command_handler::hooks::HookCommand::new(&caller, &store, &mut item, None);
    /// assert!(command.is_create());
    /// # }
    /// ```
    pub fn new(
        caller: &'a Caller,
        store: &'a Store,
        item: &'a mut Item,
        stored: Option<&'a Item>,
    ) -> Self {
        HookCommand {
            caller,
            store,
            item,
            stored,
            guards: Vec::new(),
        }
    }

    /// Who sends the command.
    pub fn caller(&self) -> &Caller {
        self.caller
    }

    /// The store, for the reads a rule needs (the data table, a service's own tables through
    /// [`Store::client`]).
    pub fn store(&self) -> &Store {
        self.store
    }

    /// The new version as it will be written (keys, version, tenant and audit fields included),
    /// with the attributes as the hook has left them so far.
    pub fn item(&self) -> &Item {
        self.item
    }

    /// Whether the command creates the item (the new version is 1 and nothing is stored).
    pub fn is_create(&self) -> bool {
        self.item.version == 1
    }

    /// The version this command builds on, as the command read it (`None` for a create, or for a
    /// `POST` over a version no longer stored). Never a read of its own.
    pub fn stored(&self) -> Option<&Item> {
        self.stored
    }

    /// An attribute of the new version.
    pub fn attribute(&self, name: &str) -> Option<&Value> {
        self.item.attributes.get(name)
    }

    /// Sets an attribute of the new version; the model checks the item again afterwards.
    pub fn set_attribute(&mut self, name: impl Into<String>, value: impl Into<Value>) {
        self.item.attributes.insert(name.into(), value.into());
    }

    /// Removes an attribute of the new version; the model checks the item again afterwards.
    pub fn remove_attribute(&mut self, name: &str) -> Option<Value> {
        self.item.attributes.remove(name)
    }

    /// Guards the write with the tenant's counter `name` (of the new version's tenant): it moves
    /// by `delta` only if it stays within `0..=at_most`, in the write's own transaction; when it
    /// would not, nothing is written and the caller gets `refusal`.
    ///
    /// # Errors
    ///
    /// A name that is empty, too long or holds a control character, or a negative `at_most`: a
    /// fault of the hook (500).
    pub fn counter(
        &mut self,
        name: &str,
        delta: i64,
        at_most: i64,
        refusal: ApiError,
    ) -> Result<(), ApiError> {
        let guard = Guard::counter(self.item.tenant_code.clone(), name, delta, at_most)
            .map_err(|e| ApiError::Internal(format!("a command hook's counter: {e}")))?;
        self.guards.push((guard, refusal));
        Ok(())
    }

    /// Guards the write with an item of the service's own (a `ConditionCheck` on one of its
    /// tables, or a write of its own that must happen with the version or not at all); when its
    /// condition fails, nothing is written and the caller gets `refusal`.
    pub fn guard(&mut self, item: TransactWriteItem, refusal: ApiError) {
        self.guards.push((Guard::item(item), refusal));
    }

    /// The guards the hook added, each with its refusal.
    pub(crate) fn into_guards(self) -> Vec<(Guard, ApiError)> {
        self.guards
    }
}
