//! Command hooks: a service's own rules on the commands of an entity, written in Rust.
//!
//! A hook is registered for one entity of the service's model, as a plain closure
//! ([`Hooks::on_fn`]), an `async fn` ([`Hooks::on_async`]) or a type implementing [`CommandHook`]
//! ([`Hooks::on`]); one hook per entity ([`Hooks::check`] refuses two). It runs for every `POST` and
//! `PATCH` of that entity after the model's checks (the version rules, the attributes, the tenant)
//! and before the write, and sees the caller, the new version and the version it builds on
//! ([`HookCommand::stored`], read only when the command needs it anyway: a create stays one round
//! trip), as JSON attributes or as the entity's Rust type ([`HookCommand::typed`]). It may:
//!
//! - **refuse** the command with a problem document of its choosing ([`ApiError::refused`], with
//!   one of the statuses the HTTP contract documents for commands, [`cqrs_problem::REFUSAL_STATUSES`]);
//!   nothing is written;
//! - **adjust attributes** ([`HookCommand::set_attribute`], [`HookCommand::remove_attribute`],
//!   [`HookCommand::set_typed`]); the model checks the item again and computes its index keys again
//!   afterwards;
//! - **read** other items of the command's tenant, by entity and key attributes only
//!   ([`HookCommand::reader`]: no write, no key spelled out by hand, no other tenant);
//! - **guard** the write with conditions of the same transaction ([`HookCommand::counter`],
//!   [`HookCommand::check_limit`] on a bounded group the model declares, [`HookCommand::require`]
//!   on a live item, and [`HookCommand::own_table_guard`] on a table of the service's own): a rule
//!   across items read
//!   through an index is racy, a guard is not. When a guard does not hold, nothing is written and
//!   the caller gets the refusal the hook gave with it. Counters of one name are one guard (their
//!   deltas summed, the tightest `at_most` kept with its refusal); a command takes at most
//!   [`MAX_GUARDS`] (97) guards after that, DynamoDB's 100 transaction items less the 3 the command
//!   writes itself (its version row, its head, its idempotency record, counted with or without an
//!   `Idempotency-Key`), and no two guards on one item: otherwise the hook is at fault, a 500 whose
//!   logged detail names the hook's entity and the guard ([`cqrs_store::guard::prepare`]).
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
//! The three forms of a hook, one rule each:
//!
//! ```
//! use cqrs_command_handler::hooks::{CommandHook, HookCommand, HookFuture, Hooks};
//! use cqrs_problem::ApiError;
//!
//! fn reference_only(copy: &str) -> ApiError {
//!     ApiError::refused(422, "urn:library:reference-copy", "Reference copy", format!("copy {copy} stays in the library"))
//! }
//!
//! // A closure: the argument's type is inferred.
//! let closures = Hooks::new().on_fn("loan", |cmd| {
//!     let copy = cmd.attribute("copyId").and_then(|v| v.as_str()).unwrap_or_default();
//!     if copy.starts_with("REF-") {
//!         return Err(reference_only(copy));
//!     }
//!     Ok(())
//! });
//!
//! // An async fn, for a rule that reads.
//! async fn member_exists(cmd: &mut HookCommand<'_>) -> Result<(), ApiError> {
//!     let Some(member) = cmd.attribute("memberId").cloned() else { return Ok(()) };
//!     let key = cqrs_item::Map::from([("memberId".to_string(), member)]);
//!     match cmd.reader().get("member", &key).await? {
//!         Some(found) if !found.is_deleted => Ok(()),
//!         _ => Err(ApiError::refused(422, "urn:library:no-member", "No such member", "no such member")),
//!     }
//! }
//! let async_fns = Hooks::new().on_async("loan", member_exists);
//!
//! // The trait, for a hook with state of its own.
//! struct LoanRules;
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
//! let traits = Hooks::new().on("loan", LoanRules);
//!
//! for hooks in [closures, async_fns, traits] {
//!     assert!(hooks.get("loan").is_some());
//! }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use aws_sdk_dynamodb::types::TransactWriteItem;
use cqrs_caller::Caller;
use cqrs_item::entity::EntityAttributes;
use cqrs_item::{Item, Map, TypedEntity, Value};
use cqrs_keys::TENANT_COMMON;
use cqrs_model::{Entity, ItemView, Model};
use cqrs_problem::ApiError;
use cqrs_store::Store;
use cqrs_store::guard::Guard;
pub use cqrs_store::guard::MAX_GUARDS;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// What [`CommandHook::before_write`] returns: `Ok` lets the command go on (with what the hook
/// adjusted and the guards it added), an error is the caller's answer and nothing is written.
pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<(), ApiError>> + Send + 'a>>;

/// A service's rule on the commands of one entity; see the [module docs](self).
pub trait CommandHook: Send + Sync + 'static {
    /// Runs after the model's checks and before the write of `command`'s new version.
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a>;
}

/// Every `async fn(&mut HookCommand<'_>) -> Result<(), ApiError>` whose future is `Send`, as
/// [`Hooks::on_async`] takes it: one lifetime for the borrow and the command, so that
/// `for<'c> AsyncHook<'c>` holds for an `async fn` item (a closure returning a future works as
/// well when its future borrows nothing but the command).
///
/// ```
/// use cqrs_command_handler::hooks::{AsyncHook, HookCommand};
/// use cqrs_problem::ApiError;
///
/// async fn nothing(_: &mut HookCommand<'_>) -> Result<(), ApiError> {
///     Ok(())
/// }
/// fn takes<F: for<'c> AsyncHook<'c>>(_: F) {}
/// takes(nothing);
/// ```
pub trait AsyncHook<'c>: Send + Sync + 'static {
    /// The future of one call.
    type Fut: Future<Output = Result<(), ApiError>> + Send + 'c;
    /// Runs the hook on `command`.
    fn call(&self, command: &'c mut HookCommand<'c>) -> Self::Fut;
}

impl<'c, F, Fut> AsyncHook<'c> for F
where
    F: Fn(&'c mut HookCommand<'c>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), ApiError>> + Send + 'c,
{
    type Fut = Fut;
    fn call(&self, command: &'c mut HookCommand<'c>) -> Fut {
        self(command)
    }
}

/// A closure registered with [`Hooks::on_fn`].
struct FnHook<F>(F);

impl<F> CommandHook for FnHook<F>
where
    F: Fn(&mut HookCommand<'_>) -> Result<(), ApiError> + Send + Sync + 'static,
{
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        let answer = (self.0)(command);
        Box::pin(std::future::ready(answer))
    }
}

/// An `async fn` registered with [`Hooks::on_async`].
struct AsyncFnHook<F>(F);

impl<F> CommandHook for AsyncFnHook<F>
where
    F: for<'c> AsyncHook<'c>,
{
    fn before_write<'a>(&'a self, command: &'a mut HookCommand<'_>) -> HookFuture<'a> {
        Box::pin(async move {
            // A command of one lifetime, its borrow's, over the same item, base and guards.
            let mut command = command.reborrow();
            self.0.call(&mut command).await
        })
    }
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
    /// Every hook registered, in order (two for one entity are kept so that `check` names them).
    registered: Vec<(String, Arc<dyn CommandHook>)>,
    /// The hook of each entity: the last registered.
    by_entity: HashMap<String, Arc<dyn CommandHook>>,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&String> = self.registered.iter().map(|(name, _)| name).collect();
        f.debug_struct("Hooks").field("entities", &names).finish()
    }
}

impl Hooks {
    /// No hooks.
    pub fn new() -> Self {
        Hooks::default()
    }

    /// `hook` (a type implementing [`CommandHook`]) on the commands of `entity`. One hook per
    /// entity: [`check`](Hooks::check) refuses a second, and says whether every entity named is in
    /// the model.
    pub fn on(self, entity: impl Into<String>, hook: impl CommandHook) -> Self {
        self.register(entity.into(), Arc::new(hook))
    }

    /// A closure on the commands of `entity` (its argument's type is inferred):
    ///
    /// ```
    /// use cqrs_problem::ApiError;
    /// let hooks = cqrs_command_handler::hooks::Hooks::new().on_fn("order", |cmd| {
    ///     if cmd.is_delete() {
    ///         return Err(ApiError::refused(409, "urn:shop:kept", "Kept", "orders are never deleted"));
    ///     }
    ///     Ok(())
    /// });
    /// assert!(hooks.get("order").is_some());
    /// ```
    pub fn on_fn<F>(self, entity: impl Into<String>, hook: F) -> Self
    where
        F: Fn(&mut HookCommand<'_>) -> Result<(), ApiError> + Send + Sync + 'static,
    {
        self.register(entity.into(), Arc::new(FnHook(hook)))
    }

    /// An `async fn` on the commands of `entity`:
    ///
    /// ```
    /// use cqrs_command_handler::hooks::{HookCommand, Hooks};
    /// use cqrs_problem::ApiError;
    ///
    /// async fn orders(cmd: &mut HookCommand<'_>) -> Result<(), ApiError> {
    ///     let placed = cmd.reader().counter("orders").await?;
    ///     cmd.set_attribute("rank", placed + 1);
    ///     Ok(())
    /// }
    /// let hooks = Hooks::new().on_async("order", orders);
    /// assert!(hooks.get("order").is_some());
    /// ```
    pub fn on_async<F>(self, entity: impl Into<String>, hook: F) -> Self
    where
        F: for<'c> AsyncHook<'c>,
    {
        self.register(entity.into(), Arc::new(AsyncFnHook(hook)))
    }

    fn register(mut self, entity: String, hook: Arc<dyn CommandHook>) -> Self {
        self.by_entity.insert(entity.clone(), hook.clone());
        self.registered.push((entity, hook));
        self
    }

    /// The hook of `entity`, if there is one (the last registered, when [`check`](Hooks::check)
    /// was not asked).
    pub fn get(&self, entity: &str) -> Option<&dyn CommandHook> {
        self.by_entity.get(entity).map(|hook| hook.as_ref())
    }

    /// Whether no hook is registered.
    pub fn is_empty(&self) -> bool {
        self.registered.is_empty()
    }

    /// Every entity a hook is registered for is an entity of `model` (a typo would leave a rule
    /// silently unapplied), and has one hook (a second would silently replace the first): else
    /// what is wrong, naming the entities. `App::with_hooks` asks it, so a cold start fails on it.
    ///
    /// ```
    /// # use cqrs_command_handler::hooks::Hooks;
    /// let model = cqrs_model::Model::example();
    /// assert!(Hooks::new().on_fn("order", |_| Ok(())).check(&model).is_ok());
    /// assert!(Hooks::new().on_fn("ordr", |_| Ok(())).check(&model).is_err());
    /// let twice = Hooks::new().on_fn("order", |_| Ok(())).on_fn("order", |_| Ok(()));
    /// assert!(twice.check(&model).unwrap_err().contains("entity order has 2 hooks"));
    /// ```
    pub fn check(&self, model: &cqrs_model::Model) -> Result<(), String> {
        let mut problems = Vec::new();
        let mut unknown: Vec<&str> = self
            .by_entity
            .keys()
            .filter(|name| model.entity(name).is_none())
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            unknown.sort_unstable();
            problems.push(format!(
                "command hooks registered for entities the model does not have: {}",
                unknown.join(", ")
            ));
        }
        let mut names: Vec<&str> = self.by_entity.keys().map(String::as_str).collect();
        names.sort_unstable();
        for name in names {
            let count = self.registered.iter().filter(|(e, _)| e == name).count();
            if count > 1 {
                problems.push(format!(
                    "entity {name} has {count} hooks: one hook per entity, put the rules in one"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}

/// The guards a hook adds: its own, or those of the command handler's run of the hook.
enum Guards<'a> {
    Owned(Vec<(Guard, ApiError)>),
    Borrowed(&'a mut Vec<(Guard, ApiError)>),
}

impl Guards<'_> {
    fn list(&mut self) -> &mut Vec<(Guard, ApiError)> {
        match self {
            Guards::Owned(list) => list,
            Guards::Borrowed(list) => list,
        }
    }
}

/// The command a hook sees: the caller, the new version (its attributes may be adjusted), the
/// version it builds on, a read-only view of the tenant's items ([`HookCommand::reader`]) and the
/// guards the hook adds to the write.
pub struct HookCommand<'a> {
    caller: &'a Caller,
    store: &'a Store,
    model: Option<&'a Model>,
    entity: Option<&'a Entity>,
    item: &'a mut Item,
    stored: Option<&'a Item>,
    guards: Guards<'a>,
}

impl fmt::Debug for HookCommand<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let guards = match &self.guards {
            Guards::Owned(list) => list.len(),
            Guards::Borrowed(list) => list.len(),
        };
        f.debug_struct("HookCommand")
            .field("id", &self.item.id)
            .field("version", &self.item.version)
            .field("guards", &guards)
            .finish()
    }
}

impl<'a> HookCommand<'a> {
    /// The command of `caller` writing `item` on top of `stored` (tests of a service's hooks build
    /// one this way, [`with_model`](HookCommand::with_model) for the reads and the typed views;
    /// the command handler does for every command of a hooked entity).
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
            model: None,
            entity: None,
            item,
            stored,
            guards: Guards::Owned(Vec::new()),
        }
    }

    /// The same command served by `model`: its reads build keys from the model's templates, and
    /// the hook's entity is the item's (by its `entity`, else its keys).
    ///
    /// ```
    /// # async fn demo(store: cqrs_store::Store) {
    /// let model = cqrs_model::Model::example();
    /// let caller = cqrs_caller::Caller::new("u1", "t1", vec![]);
    /// let mut item = cqrs_item::Item::example();
    /// let command = cqrs_command_handler::hooks::HookCommand::new(&caller, &store, &mut item, None)
    ///     .with_model(&model);
    /// assert!(command.is_create());
    /// # }
    /// ```
    pub fn with_model(mut self, model: &'a Model) -> Self {
        self.model = Some(model);
        self.entity = match self.item.entity.as_deref() {
            Some(name) => model.entity(name),
            None => model.entity_of_keys(&self.item.pk, base_sk(&self.item.sk)),
        };
        self
    }

    /// The command the command handler runs a hook on: its guards go to `guards`.
    pub(crate) fn running(
        caller: &'a Caller,
        store: &'a Store,
        model: Option<&'a Model>,
        entity: Option<&'a Entity>,
        item: &'a mut Item,
        stored: Option<&'a Item>,
        guards: &'a mut Vec<(Guard, ApiError)>,
    ) -> Self {
        HookCommand {
            caller,
            store,
            model,
            entity,
            item,
            stored,
            guards: Guards::Borrowed(guards),
        }
    }

    /// This command borrowed for a shorter time: the same item, base and guards.
    fn reborrow(&mut self) -> HookCommand<'_> {
        HookCommand {
            caller: self.caller,
            store: self.store,
            model: self.model,
            entity: self.entity,
            item: &mut *self.item,
            stored: self.stored,
            guards: Guards::Borrowed(self.guards.list()),
        }
    }

    /// Who sends the command.
    pub fn caller(&self) -> &Caller {
        self.caller
    }

    /// Read-only, key-safe reads of the command's tenant ([`HookReader`]).
    pub fn reader(&self) -> HookReader<'a> {
        let tenant = if self.item.tenant_code == TENANT_COMMON {
            self.caller.tenant_code.clone()
        } else {
            self.item.tenant_code.clone()
        };
        HookReader {
            store: self.store,
            model: self.model,
            tenant,
            hook: self.entity_name().to_string(),
        }
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

    /// Whether the command deletes the item (soft delete): the new version is deleted and the
    /// version it builds on is not, or is not known (a create, a base no longer stored).
    pub fn is_delete(&self) -> bool {
        self.item.is_deleted && !self.stored.is_some_and(|s| s.is_deleted)
    }

    /// Whether the command restores a deleted item: the version it builds on is deleted and the
    /// new one is not.
    pub fn is_restore(&self) -> bool {
        !self.item.is_deleted && self.stored.is_some_and(|s| s.is_deleted)
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

    /// The name of the hook's entity (`?` when the command is not one of the model's).
    fn entity_name(&self) -> &str {
        self.entity
            .map(|e| e.name.as_str())
            .or(self.item.entity.as_deref())
            .unwrap_or("?")
    }

    /// The 500 of a hook's misuse of the API, naming its entity.
    fn fault(&self, what: impl fmt::Display) -> ApiError {
        ApiError::Internal(format!(
            "the command hook of entity {}: {what}",
            self.entity_name()
        ))
    }

    /// `T` is the hook's entity, or the hook's fault.
    fn same_entity<T: TypedEntity>(&self) -> Result<(), ApiError> {
        let name = self.entity_name();
        if T::ENTITY == name {
            Ok(())
        } else {
            Err(self.fault(format!(
                "a {} (entity {}) is not a {name}",
                std::any::type_name::<T>(),
                T::ENTITY
            )))
        }
    }

    /// `item`'s attributes as `T`.
    fn read_typed<T: TypedEntity + DeserializeOwned>(&self, item: &Item) -> Result<T, ApiError> {
        self.same_entity::<T>()?;
        typed_attributes(&item.attributes).map_err(|e| {
            self.fault(format!(
                "version {} does not read as a {}: {e}",
                item.version,
                std::any::type_name::<T>()
            ))
        })
    }

    /// The new version's attributes as the entity's Rust type (`cqrs model rust` generates it;
    /// see [`cqrs_item::typed`]), with the attributes as the hook has left them so far.
    ///
    /// # Errors
    ///
    /// A fault of the hook (500, naming its entity): `T` is another entity's type, or the
    /// attributes do not read as `T` (a type out of step with the model).
    ///
    /// ```
    /// use cqrs_problem::ApiError;
    ///
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// #[serde(rename_all = "camelCase")]
    /// struct Order { user_id: String, status: String }
    /// impl cqrs_item::TypedEntity for Order { const ENTITY: &'static str = "order"; }
    ///
    /// let hooks = cqrs_command_handler::hooks::Hooks::new().on_fn("order", |cmd| {
    ///     let order: Order = cmd.typed()?;
    ///     if order.status == "CANCELLED" && cmd.is_create() {
    ///         return Err(ApiError::refused(422, "urn:shop:cancelled", "Cancelled", "an order starts placed"));
    ///     }
    ///     Ok(())
    /// });
    /// # assert!(!hooks.is_empty());
    /// ```
    pub fn typed<T: TypedEntity + DeserializeOwned>(&self) -> Result<T, ApiError> {
        self.read_typed(self.item)
    }

    /// The version the command builds on as the entity's Rust type (`None` as for
    /// [`stored`](HookCommand::stored)).
    ///
    /// # Errors
    ///
    /// As [`typed`](HookCommand::typed).
    pub fn stored_typed<T: TypedEntity + DeserializeOwned>(&self) -> Result<Option<T>, ApiError> {
        self.stored.map(|s| self.read_typed(s)).transpose()
    }

    /// Writes `value`'s fields over the new version's attributes: each field it holds is set, each
    /// it leaves out (an `Option` that is `None`, skipped or `null`) is removed when the model
    /// declares that attribute; attributes the model does not declare are kept. The model checks
    /// the item again afterwards, as for [`set_attribute`](HookCommand::set_attribute).
    ///
    /// # Errors
    ///
    /// A fault of the hook (500): `T` is another entity's type, or does not serialise to an
    /// object.
    pub fn set_typed<T: TypedEntity + Serialize>(&mut self, value: &T) -> Result<(), ApiError> {
        self.same_entity::<T>()?;
        let text =
            serde_json::to_string(value).map_err(|e| self.fault(format!("set_typed: {e}")))?;
        let fields = match cqrs_item::parse_json(&text) {
            Ok(Value::Map(fields)) => fields,
            Ok(other) => return Err(self.fault(format!("set_typed: {other} is not an object"))),
            Err(e) => return Err(self.fault(format!("set_typed: {e}"))),
        };
        if let Some(entity) = self.entity {
            for name in entity.attributes.keys() {
                if !fields.contains_key(name) {
                    self.item.attributes.remove(name);
                }
            }
        }
        for (name, value) in fields {
            if value.is_null() {
                self.item.attributes.remove(&name);
            } else {
                self.item.attributes.insert(name, value);
            }
        }
        Ok(())
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
        self.guards.list().push((guard, refusal));
        Ok(())
    }

    /// Guards the write with the size of a bounded group the model declares (`limits` in
    /// `model.toml`): the group `group` of limit `constraint` (`entity.limit`, the values of its
    /// `per` attributes in order; see [`HookReader::limit_count`]) in the command's tenant has at
    /// most `at_most` members when the write commits (0: none), checked in the write's own
    /// transaction; else nothing is written and the caller gets `refusal`.
    ///
    /// ```
    /// use cqrs_problem::ApiError;
    /// // A member with loans out is not deleted.
    /// let hooks = cqrs_command_handler::hooks::Hooks::new().on_fn("member", |cmd| {
    ///     if cmd.is_delete() {
    ///         let member = cmd.attribute("memberId").and_then(|v| v.as_str()).unwrap_or_default().to_string();
    ///         let holds = ApiError::refused(409, "urn:library:loans-out", "Loans out", format!("member {member} holds loans"));
    ///         cmd.check_limit("loan.loans_out", &[&member], 0, holds)?;
    ///     }
    ///     Ok(())
    /// });
    /// # assert!(!hooks.is_empty());
    /// ```
    ///
    /// # Errors
    ///
    /// A fault of the hook (500): the model has no such limit, or `group` does not fit its `per`.
    pub fn check_limit(
        &mut self,
        constraint: &str,
        group: &[&str],
        at_most: u32,
        refusal: ApiError,
    ) -> Result<(), ApiError> {
        let reader = self.reader();
        let model = reader.model()?;
        let key = limit_key(model, reader.tenant(), constraint, group)
            .map_err(|e| self.fault(format!("check_limit: {e}")))?;
        self.guards
            .list()
            .push((Guard::CheckMembers { key, at_most }, refusal));
        Ok(())
    }

    /// Guards the write with the existence of a live item: the item of `entity` named by `key`
    /// (the attributes its key templates use, in the command's tenant, as [`HookReader::get`]
    /// names it) exists and is not soft-deleted when the write commits, checked on its head in
    /// the write's own transaction (no read); else nothing is written and the caller gets
    /// `refusal`. The head says whether the item is deleted only for an entity some reference of
    /// the model names (`references` in `model.toml`: its heads mirror it).
    ///
    /// # Errors
    ///
    /// A fault of the hook (500): an entity the model lacks or no reference names, or a key that
    /// does not name one of its items.
    pub fn require(&mut self, entity: &str, key: &Map, refusal: ApiError) -> Result<(), ApiError> {
        let reader = self.reader();
        let model = reader.model()?;
        if model.entity(entity).is_some() && !model.is_referenced(entity) {
            return Err(self.fault(format!(
                "require({entity:?}): no reference of the model names entity {entity}, so its \
                 heads do not say whether it is deleted: declare the reference in model.toml"
            )));
        }
        let (pk, sk) = reader.keys(entity, key)?;
        let condition = cqrs_store::guard::HeadCondition {
            live: true,
            ..Default::default()
        };
        self.guards
            .list()
            .push((Guard::RequireHead { pk, sk, condition }, refusal));
        Ok(())
    }

    /// Guards the write with an item of a table of the service's own (a `ConditionCheck` on it, or
    /// a write of its own that must happen with the version or not at all); when its condition
    /// fails, nothing is written and the caller gets `refusal`.
    ///
    /// # Errors
    ///
    /// A fault of the hook (500): `item` names one of the deployment's own tables (command, data,
    /// history, idempotency, parked, sequences: the framework's items are guarded by the
    /// framework), or no table at all.
    pub fn own_table_guard(
        &mut self,
        item: TransactWriteItem,
        refusal: ApiError,
    ) -> Result<(), ApiError> {
        let Some(table) = table_of(&item) else {
            return Err(self.fault("own_table_guard: the item names no table"));
        };
        let tables = self.store.tables();
        let framework = [
            ("command", Some(&tables.command)),
            ("data", Some(&tables.data)),
            ("history", Some(&tables.history)),
            ("idempotency", Some(&tables.idempotency)),
            ("parked", tables.parked.as_ref()),
            ("sequences", tables.sequences.as_ref()),
        ];
        if let Some((role, _)) = framework
            .iter()
            .find(|(_, name)| name.is_some_and(|name| name == table))
        {
            return Err(self.fault(format!(
                "own_table_guard on table {table}, the deployment's {role} table: a hook guards \
                 only tables of the service's own (declare the rule in model.toml, or use counter)"
            )));
        }
        self.guards.list().push((Guard::item(item), refusal));
        Ok(())
    }
}

/// The table a transaction item works on.
fn table_of(item: &TransactWriteItem) -> Option<&str> {
    if let Some(check) = &item.condition_check {
        return Some(check.table_name());
    }
    if let Some(put) = &item.put {
        return Some(put.table_name());
    }
    if let Some(update) = &item.update {
        return Some(update.table_name());
    }
    item.delete.as_ref().map(|delete| delete.table_name())
}

/// A sort key without its `@version`.
fn base_sk(sk: &str) -> &str {
    sk.rsplit_once('@').map_or(sk, |(base, _)| base)
}

/// Attributes read as a typed entity (through their exact JSON text: numbers stay exact).
fn typed_attributes<T: DeserializeOwned>(attributes: &Map) -> Result<T, String> {
    let text = serde_json::to_string(attributes).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// A hook's reads ([`HookCommand::reader`]): read only, and key-safe. An item is named by its
/// entity and the attributes its key templates use; the keys are built from the model and the
/// command's tenant (`common` for a common entity), never given, so a hook reads neither another
/// tenant's items nor the framework's own records. The reads are the service's own: the caller's
/// read rules on common entities do not apply.
///
/// Every method's error is a 500 naming the hook's entity when the read is the hook's fault (an
/// entity or pattern the model does not have, a key attribute missing), or the store's error.
#[derive(Debug, Clone)]
pub struct HookReader<'a> {
    store: &'a Store,
    model: Option<&'a Model>,
    tenant: String,
    hook: String,
}

impl HookReader<'_> {
    fn fault(&self, what: impl fmt::Display) -> ApiError {
        ApiError::Internal(format!("the command hook of entity {}: {what}", self.hook))
    }

    fn model(&self) -> Result<&Model, ApiError> {
        self.model
            .ok_or_else(|| self.fault("reads need the model (HookCommand::with_model)"))
    }

    /// The tenant whose items the reads see: the command's.
    pub fn tenant(&self) -> &str {
        &self.tenant
    }

    /// The table keys (`pk`, base `sk`) of the item of `entity` named by `key`.
    fn keys(&self, entity: &str, key: &Map) -> Result<(String, String), ApiError> {
        let model = self.model()?;
        let Some(found) = model.entity(entity) else {
            return Err(self.fault(format!(
                "a read of entity {entity:?}, which the model does not have"
            )));
        };
        let tenant = if found.common {
            TENANT_COMMON
        } else {
            self.tenant.as_str()
        };
        let view = ItemView {
            tenant,
            created_at: "",
            attributes: &EntityAttributes::of(key),
        };
        let (pk, sk) = found.primary_key(&view).map_err(|e| {
            self.fault(format!(
                "a read of entity {entity}: {}: {}",
                e.attribute, e.message
            ))
        })?;
        // The keys must be this entity's in this tenant (a key part can never reach elsewhere).
        let same_entity = model
            .entity_of_keys(&pk, &sk)
            .is_some_and(|e| e.name == found.name);
        if !same_entity || cqrs_keys::tenant_code(&pk) != Some(tenant) {
            return Err(self.fault(format!(
                "a read of entity {entity}: {key:?} does not name one of its items in tenant {tenant}"
            )));
        }
        Ok((pk, sk))
    }

    /// The item of `entity` named by `key` (the attributes its key templates use) as the data
    /// table holds it, strongly consistent: soft-deleted or not; `None` when the table holds no
    /// such item or it has expired. The data table is the projection of the command table, a
    /// moment behind it: [`latest`](HookReader::latest) reads the newest version itself.
    ///
    /// ```no_run
    /// # async fn demo(cmd: &cqrs_command_handler::hooks::HookCommand<'_>) -> Result<(), cqrs_problem::ApiError> {
    /// let key = cqrs_item::Map::from([("memberId".to_string(), "m1".into())]);
    /// let member = cmd.reader().get("member", &key).await?;
    /// # Ok(()) }
    /// ```
    pub async fn get(&self, entity: &str, key: &Map) -> Result<Option<Item>, ApiError> {
        let (pk, sk) = self.keys(entity, key)?;
        let wanted = (pk, sk);
        let mut items = self
            .store
            .get_data_items(std::slice::from_ref(&wanted))
            .await?;
        let now = chrono::Utc::now().timestamp();
        Ok(items.remove(&wanted).filter(|item| !item.is_expired(now)))
    }

    /// [`get`](HookReader::get) as the entity's Rust type (`T::ENTITY` names the entity).
    pub async fn get_typed<T: TypedEntity + DeserializeOwned>(
        &self,
        key: &Map,
    ) -> Result<Option<T>, ApiError> {
        match self.get(T::ENTITY, key).await? {
            Some(item) => typed_attributes(&item.attributes).map(Some).map_err(|e| {
                self.fault(format!("{} does not read as a {}: {e}", item.id, T::ENTITY))
            }),
            None => Ok(None),
        }
    }

    /// The newest version of the item of `entity` named by `key`, as the command table holds it
    /// (its head, then that version's row, strongly consistent; the data table's item when the row
    /// is gone and the item is at that version): no lag behind the writes. `None` when the item
    /// has no version, or its newest version is no longer stored or has expired.
    pub async fn latest(&self, entity: &str, key: &Map) -> Result<Option<Item>, ApiError> {
        let (pk, sk) = self.keys(entity, key)?;
        let latest = match self.store.get_head(&pk, &sk).await? {
            Some(latest) => Some(latest),
            // No head (a deployment whose heads are not complete): the rows say.
            None => self.store.latest_command_version(&pk, &sk).await?,
        };
        let Some(latest) = latest else {
            return Ok(None);
        };
        let now = chrono::Utc::now().timestamp();
        let live = |item: Option<Item>| item.filter(|item| !item.is_expired(now));
        if let Some(row) = live(self.store.get_command(&pk, &sk, latest).await?) {
            return Ok(Some(row));
        }
        Ok(live(self.get(entity, key).await?).filter(|item| item.version == latest))
    }

    /// The first `limit` items of the model's access pattern `name` with `params` (the pattern's
    /// parameters, each a string or a number), in the pattern's order, in the command's tenant:
    /// what `GET /query/{name}` answers (live items, not soft-deleted ones).
    pub async fn pattern(
        &self,
        name: &str,
        params: &Map,
        limit: u16,
    ) -> Result<Vec<Item>, ApiError> {
        let model = self.model()?;
        let mut texts = Vec::with_capacity(params.len());
        for (param, value) in params {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.as_str().to_string(),
                Value::Bool(b) => b.to_string(),
                other => {
                    return Err(self.fault(format!(
                        "pattern {name}: parameter {param} is {other}, not a string or a number"
                    )));
                }
            };
            texts.push((param.as_str(), text));
        }
        let given: Vec<(&str, &str)> = texts.iter().map(|(p, t)| (*p, t.as_str())).collect();
        let plan = model
            .query(name, &self.tenant, &given)
            .map_err(|e| self.fault(format!("pattern {name}: {}: {}", e.param, e.message)))?;
        let page = cqrs_query_handler::pattern::read_page(
            self.store,
            model,
            &plan,
            cqrs_query_handler::pattern::PageRequest {
                order: cqrs_store::query::Order::Ascending,
                limit: usize::from(limit.max(1)),
                include_deleted: false,
                live_at: Some(chrono::Utc::now().timestamp()),
                cursor: None,
            },
        )
        .await?;
        Ok(page.items)
    }

    /// How many items the bounded group `group` of the model's limit `constraint` holds now
    /// (`entity.limit`, as `loan.loans_out` for `limits.loans_out` of entity `loan`; `group` the
    /// values of its `per` attributes, in order), from its guard item in the command's tenant,
    /// strongly consistent. A read, so racy as every read before a write: the declaration itself
    /// keeps the bound.
    ///
    /// ```no_run
    /// # async fn demo(cmd: &cqrs_command_handler::hooks::HookCommand<'_>) -> Result<(), cqrs_problem::ApiError> {
    /// let out = cmd.reader().limit_count("loan.loans_out", &["m1"]).await?;
    /// # Ok(()) }
    /// ```
    pub async fn limit_count(&self, constraint: &str, group: &[&str]) -> Result<usize, ApiError> {
        let key = limit_key(self.model()?, &self.tenant, constraint, group)
            .map_err(|e| self.fault(format!("limit_count: {e}")))?;
        Ok(self.store.limit_members(&key).await?)
    }

    /// The command tenant's counter `name` ([`HookCommand::counter`] moves it).
    pub async fn counter(&self, name: &str) -> Result<i64, ApiError> {
        Ok(self.store.counter(&self.tenant, name).await?)
    }
}

/// The guard item's key of the bounded group `group` (the values of the `per` attributes, in
/// order) of the model's limit `constraint` (`entity.limit`) in `tenant` (`common` for a common
/// entity), the values formatted as the limit's guard keys format them (key parts: case, width):
/// what a service's own route hands to `Store::limit_members` to show a group's size.
///
/// ```
/// let model = cqrs_model::Model::parse(r#"
/// [entities.loan]
/// pk = "LOAN#{tenant}"
/// sk = "{loanId}"
/// attributes.loanId = { type = "string", required = true, max = 26 }
/// attributes.memberId = { type = "string", required = true, max = 40 }
/// limits.loans_out = { per = "memberId", at_most = 3 }
/// "#).unwrap();
/// let key = cqrs_command_handler::hooks::limit_key(&model, "t1", "loan.loans_out", &["m1"]).unwrap();
/// assert_eq!(key, cqrs_keys::guard_key("t1", "loan", "loans_out", &["m1".to_string()]));
/// assert!(cqrs_command_handler::hooks::limit_key(&model, "t1", "loan.nope", &["m1"]).is_err());
/// ```
///
/// # Errors
///
/// The model has no such limit, or `group` does not fit its `per` attributes.
pub fn limit_key(
    model: &Model,
    tenant: &str,
    constraint: &str,
    group: &[&str],
) -> Result<String, String> {
    let (entity, limit) = constraint
        .split_once('.')
        .and_then(|(entity, name)| {
            let entity = model.entity(entity)?;
            let limit = entity.limits.iter().find(|l| l.name == name)?;
            Some((entity, limit))
        })
        .ok_or_else(|| format!("the model has no limit {constraint:?} (entity.limit)"))?;
    if group.len() != limit.per.len() {
        return Err(format!(
            "{constraint}: {} values for the {} attributes of `per` ({})",
            group.len(),
            limit.per.len(),
            limit.per.join(", ")
        ));
    }
    let values: Vec<(&str, cqrs_model::ValueRef<'_>)> = limit
        .per
        .iter()
        .zip(group)
        .map(|(name, value)| {
            let number = entity
                .attributes
                .get(name)
                .is_some_and(|a| a.ty == cqrs_model::AttrType::Number);
            let value = if number {
                cqrs_model::ValueRef::Num(value)
            } else {
                cqrs_model::ValueRef::Str(value)
            };
            (name.as_str(), value)
        })
        .collect();
    // The group of any item with these values, whatever the condition.
    let unconditional = cqrs_model::Limit {
        condition: cqrs_model::Condition::default(),
        ..limit.clone()
    };
    let group = unconditional.group(entity, &values, false).ok_or_else(|| {
        format!(
            "{constraint}: {group:?} are not values of {}",
            limit.per.join(", ")
        )
    })?;
    let scope = if entity.common { TENANT_COMMON } else { tenant };
    Ok(cqrs_keys::guard_key(
        scope,
        &entity.name,
        &limit.name,
        &group,
    ))
}
