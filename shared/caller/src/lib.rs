//! Who is calling, from where, and which tenants they may read and write.
//!
//! In AWS the caller comes from the HTTP API's JWT authorizer: the claims `sub`, the tenant claim
//! and the roles claim. The two claim names are configuration ([`ClaimNames`]): `JWT_TENANT_CLAIM`
//! and `JWT_ROLES_CLAIM` (the template's `TenantClaim` and `RolesClaim` parameters), by default
//! `custom:tenant` and `custom:roles`. Only with `CALLER_MODE=local` (local runs, never the SAM
//! template) does it come from the `x-tenant-code`, `x-user-id` and `x-roles` headers; without that
//! mode those headers are ignored, so a forged header cannot make anyone someone else.
//!
//! Tenant rules: a caller reads and writes partition keys of its own tenant; everyone reads the
//! `common` tenant; only a global `system_admin` writes `common` or acts for another tenant.
//!
//! Roles are scoped ([`Role`]): a role given as mbc-cqrs-serverless' `{"tenant": t, "role": r}`
//! object holds only within tenant `t`, and only when `t` is the caller's own tenant (the caller
//! acts in the tenant of its tenant claim and nowhere else); only a role without a tenant (absent or `""`,
//! or a plain role name) holds everywhere. So `[{"tenant":"t2","role":"system_admin"}]` gives a
//! caller of `t1` nothing, and `[{"tenant":"t1","role":"system_admin"}]` is an administrator of
//! `t1` only: it cannot write `common` or another tenant.
//!
//! Some of `common` is not for every tenant: the entity model may keep a common entity's partition
//! (mbc's `USER_TENANT#common`, every tenant's user links) for a global `system_admin`
//! ([`Readers`]). [`Caller::authorize_read_with`] applies that rule on top of the tenant rules,
//! asking for it only when the partition is `common`'s and the caller is not a global
//! `system_admin`, so reads of a caller's own tenant never need the model.
//!
//! When a request carries authorizer claims, the claims are the caller, whatever the mode: the
//! local headers are read only in [`CallerMode::Local`] and only for a request without any
//! authorizer context.
//!
//! ```
//! use cqrs_caller::Caller;
//!
//! let caller = Caller::new("u1", "t1", vec![]);
//! assert!(caller.authorize_write("PRODUCT#t1").is_ok());
//! assert!(caller.authorize_read("MASTER#common").is_ok());
//! assert!(caller.authorize_write("MASTER#common").is_err());
//! assert!(caller.authorize_read("PRODUCT#t2").is_err());
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(
    not(test),
    warn(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)
)]

use cqrs_keys::{TENANT_COMMON, tenant_code};
use cqrs_problem::ApiError;
use lambda_http::{Request, RequestExt, request::RequestContext};

/// The role that may write `common` and act for any tenant.
///
/// ```
/// assert_eq!(cqrs_caller::SYSTEM_ADMIN, "system_admin");
/// ```
pub const SYSTEM_ADMIN: &str = "system_admin";

/// The environment variable that chooses where callers come from.
///
/// ```
/// assert_eq!(cqrs_caller::CALLER_MODE_VAR, "CALLER_MODE");
/// ```
pub const CALLER_MODE_VAR: &str = "CALLER_MODE";

/// Where the caller of a request is read from.
///
/// ```
/// use cqrs_caller::CallerMode;
/// assert_eq!(CallerMode::parse(None).unwrap(), CallerMode::Jwt);
/// assert_eq!(CallerMode::parse(Some("local")).unwrap(), CallerMode::Local);
/// assert!(CallerMode::parse(Some("yes")).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallerMode {
    /// JWT authorizer claims only (the default, and the only mode the template uses).
    Jwt,
    /// The `x-tenant-code`, `x-user-id`, `x-roles` headers: local runs only.
    Local,
}

impl CallerMode {
    /// Reads the mode from a value of `CALLER_MODE`: absent, empty or `jwt` is [`CallerMode::Jwt`],
    /// `local` is [`CallerMode::Local`], anything else an error that names the variable.
    ///
    /// ```
    /// let err = cqrs_caller::CallerMode::parse(Some("LOCAL ")).unwrap_err();
    /// assert!(err.contains("CALLER_MODE"));
    /// ```
    pub fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") | Some("jwt") => Ok(CallerMode::Jwt),
            Some("local") => Ok(CallerMode::Local),
            Some(other) => Err(format!(
                "{CALLER_MODE_VAR}={other:?} is not valid: use `jwt` (or leave it unset) or `local`"
            )),
        }
    }

    /// Reads the mode from the process environment, and checks the claim names the process will
    /// read ([`ClaimNames::configured`]): every function calls this at start, so an empty or
    /// invalid `CALLER_MODE`, `JWT_TENANT_CLAIM` or `JWT_ROLES_CLAIM` stops it there, with a message
    /// that names the variable.
    ///
    /// ```
    /// // Unset in doctests: claims only.
    /// assert_eq!(cqrs_caller::CallerMode::from_env().unwrap(), cqrs_caller::CallerMode::Jwt);
    /// ```
    pub fn from_env() -> Result<Self, String> {
        let mode = Self::parse(std::env::var(CALLER_MODE_VAR).ok().as_deref())?;
        ClaimNames::configured()?;
        Ok(mode)
    }
}

/// The environment variable that names the JWT claim holding the caller's tenant.
///
/// ```
/// assert_eq!(cqrs_caller::TENANT_CLAIM_VAR, "JWT_TENANT_CLAIM");
/// ```
pub const TENANT_CLAIM_VAR: &str = "JWT_TENANT_CLAIM";

/// The environment variable that names the JWT claim holding the caller's roles.
///
/// ```
/// assert_eq!(cqrs_caller::ROLES_CLAIM_VAR, "JWT_ROLES_CLAIM");
/// ```
pub const ROLES_CLAIM_VAR: &str = "JWT_ROLES_CLAIM";

/// The tenant claim without `JWT_TENANT_CLAIM`: a Cognito custom attribute `tenant`.
///
/// ```
/// assert_eq!(cqrs_caller::DEFAULT_TENANT_CLAIM, "custom:tenant");
/// ```
pub const DEFAULT_TENANT_CLAIM: &str = "custom:tenant";

/// The roles claim without `JWT_ROLES_CLAIM`: a Cognito custom attribute `roles`.
///
/// ```
/// assert_eq!(cqrs_caller::DEFAULT_ROLES_CLAIM, "custom:roles");
/// ```
pub const DEFAULT_ROLES_CLAIM: &str = "custom:roles";

/// The names of the JWT claims that hold the caller's tenant and roles (the user id is always
/// `sub`). Identity providers name them differently: Cognito custom attributes `custom:tenant`,
/// Cognito groups `cognito:groups`, Auth0 namespaced claims `https://example.com/tenant`.
///
/// ```
/// use cqrs_caller::ClaimNames;
/// let names = ClaimNames::parse(Some("tenant_id"), None).unwrap();
/// assert_eq!(names.tenant, "tenant_id");
/// assert_eq!(names.roles, "custom:roles");
/// assert_eq!(ClaimNames::parse(None, None).unwrap(), ClaimNames::default());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimNames {
    /// The claim holding the caller's tenant code.
    pub tenant: String,
    /// The claim holding the caller's roles (any form [`parse_roles`] reads).
    pub roles: String,
}

impl Default for ClaimNames {
    /// `custom:tenant` and `custom:roles`.
    fn default() -> Self {
        ClaimNames {
            tenant: DEFAULT_TENANT_CLAIM.to_string(),
            roles: DEFAULT_ROLES_CLAIM.to_string(),
        }
    }
}

impl ClaimNames {
    /// Reads the names from values of `JWT_TENANT_CLAIM` and `JWT_ROLES_CLAIM`: an absent one is
    /// its default; a present one is 1 to 256 visible ASCII characters (no space), not `sub`, and
    /// the two differ. Anything else is an error that names the variable (an empty value is never
    /// read as the default: a template that meant to set it would be silently ignored).
    ///
    /// ```
    /// use cqrs_caller::ClaimNames;
    /// assert!(ClaimNames::parse(Some(""), None).unwrap_err().contains("JWT_TENANT_CLAIM"));
    /// assert!(ClaimNames::parse(None, Some("my roles")).unwrap_err().contains("JWT_ROLES_CLAIM"));
    /// assert!(ClaimNames::parse(Some("sub"), None).unwrap_err().contains("JWT_TENANT_CLAIM"));
    /// assert!(ClaimNames::parse(None, Some("custom:tenant")).unwrap_err().contains("JWT_ROLES_CLAIM"));
    /// assert!(ClaimNames::parse(Some("https://example.com/tenant"), Some("cognito:groups")).is_ok());
    /// ```
    pub fn parse(tenant: Option<&str>, roles: Option<&str>) -> Result<Self, String> {
        fn name(var: &str, value: Option<&str>, default: &str) -> Result<String, String> {
            let Some(value) = value else {
                return Ok(default.to_string());
            };
            let visible = value.bytes().all(|b| b.is_ascii_graphic());
            if value.is_empty() || value.len() > 256 || !visible {
                return Err(format!(
                    "{var}={value:?} is not a claim name: give 1 to 256 visible ASCII characters \
                     (no spaces), or leave it unset for {default:?}"
                ));
            }
            if value == "sub" {
                return Err(format!(
                    "{var}=\"sub\" is not valid: `sub` is the caller's user id, not its tenant or roles"
                ));
            }
            Ok(value.to_string())
        }
        let tenant = name(TENANT_CLAIM_VAR, tenant, DEFAULT_TENANT_CLAIM)?;
        let roles = name(ROLES_CLAIM_VAR, roles, DEFAULT_ROLES_CLAIM)?;
        if tenant == roles {
            return Err(format!(
                "{ROLES_CLAIM_VAR}={roles:?} is also the tenant claim ({TENANT_CLAIM_VAR}): \
                 the tenant and the roles are two claims"
            ));
        }
        Ok(ClaimNames { tenant, roles })
    }

    /// Reads the names from `JWT_TENANT_CLAIM` and `JWT_ROLES_CLAIM` (a value that is not
    /// Unicode is an error naming its variable).
    ///
    /// ```
    /// // Unset in doctests: the defaults.
    /// assert_eq!(cqrs_caller::ClaimNames::from_env().unwrap(), cqrs_caller::ClaimNames::default());
    /// ```
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| match std::env::var(name) {
            Ok(value) => Ok(Some(value)),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(value)) => {
                Err(format!("{name}={value:?} is not a claim name: not Unicode"))
            }
        };
        Self::parse(
            var(TENANT_CLAIM_VAR)?.as_deref(),
            var(ROLES_CLAIM_VAR)?.as_deref(),
        )
    }

    /// The names this process reads: [`ClaimNames::from_env`], read once (the first call) and
    /// kept. [`Caller::from_request`] reads claims by these names.
    ///
    /// ```
    /// assert_eq!(cqrs_caller::ClaimNames::configured().unwrap().tenant, "custom:tenant");
    /// ```
    pub fn configured() -> Result<&'static ClaimNames, String> {
        static CONFIGURED: std::sync::OnceLock<Result<ClaimNames, String>> =
            std::sync::OnceLock::new();
        CONFIGURED
            .get_or_init(ClaimNames::from_env)
            .as_ref()
            .map_err(Clone::clone)
    }
}

/// One role of a caller, with the tenant it holds in.
///
/// A role without a tenant (a plain role name, or mbc's object with `tenant` absent or `""`) holds
/// everywhere; a role with a tenant holds only within that tenant.
///
/// ```
/// use cqrs_caller::Role;
///
/// let scoped = Role::in_tenant("system_admin", "t1");
/// assert!(scoped.holds_in("t1"));
/// assert!(!scoped.holds_in("t2"));
/// assert!(Role::global("viewer").holds_in("t2"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Role {
    /// The role's name, e.g. `system_admin`.
    pub name: String,
    /// The tenant it is limited to; `None` holds in every tenant.
    pub tenant: Option<String>,
}

impl Role {
    /// A role that holds in every tenant.
    ///
    /// ```
    /// assert_eq!(cqrs_caller::Role::global("admin").tenant, None);
    /// ```
    pub fn global(name: impl Into<String>) -> Self {
        Role {
            name: name.into(),
            tenant: None,
        }
    }

    /// A role that holds only within `tenant`.
    ///
    /// ```
    /// let role = cqrs_caller::Role::in_tenant("admin", "t1");
    /// assert_eq!(role.tenant.as_deref(), Some("t1"));
    /// ```
    pub fn in_tenant(name: impl Into<String>, tenant: impl Into<String>) -> Self {
        Role {
            name: name.into(),
            tenant: Some(tenant.into()),
        }
    }

    /// Whether the role is global.
    ///
    /// ```
    /// assert!(cqrs_caller::Role::global("a").is_global());
    /// assert!(!cqrs_caller::Role::in_tenant("a", "t1").is_global());
    /// ```
    pub fn is_global(&self) -> bool {
        self.tenant.is_none()
    }

    /// Whether the role holds within `tenant`: it is global, or limited to exactly `tenant`.
    ///
    /// ```
    /// assert!(!cqrs_caller::Role::in_tenant("a", "t1").holds_in("T1"));
    /// ```
    pub fn holds_in(&self, tenant: &str) -> bool {
        self.tenant.as_deref().is_none_or(|t| t == tenant)
    }
}

/// Who may read a partition of the `common` tenant, as the entity model says for the entities it
/// could hold (the query handler maps the model's rule to this).
///
/// ```
/// use cqrs_caller::{Caller, Readers};
/// let tenant = Caller::new("u", "t1", vec![]);
/// assert!(tenant.authorize_common_read("MASTER#common", Readers::Everyone).is_ok());
/// assert_eq!(tenant.authorize_common_read("USER_TENANT#common", Readers::SystemAdmin).unwrap_err().status(), 403);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readers {
    /// Every caller (master data, settings: what `common` is for).
    Everyone,
    /// A global `system_admin` only; a `system_admin` role scoped to a tenant does not count.
    SystemAdmin,
}

/// The authenticated caller of one request.
///
/// ```
/// let admin = cqrs_caller::Caller::new("root", "t1", vec!["system_admin".into()]);
/// assert!(admin.is_system_admin());
/// assert!(admin.authorize_write("PRODUCT#t9").is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The user id (`sub`).
    pub user_id: String,
    /// The caller's own tenant.
    pub tenant_code: String,
    /// The caller's roles, each global or limited to one tenant.
    pub roles: Vec<Role>,
}

impl Caller {
    /// A caller with these parts; every role in `roles` is global (see [`Caller::with_roles`] for
    /// tenant-scoped roles).
    ///
    /// ```
    /// let c = cqrs_caller::Caller::new("u", "t", vec!["viewer".into()]);
    /// assert_eq!(c.roles, [cqrs_caller::Role::global("viewer")]);
    /// ```
    pub fn new(
        user_id: impl Into<String>,
        tenant_code: impl Into<String>,
        roles: Vec<String>,
    ) -> Self {
        Self::with_roles(
            user_id,
            tenant_code,
            roles.into_iter().map(Role::global).collect(),
        )
    }

    /// A caller with these parts and scoped roles. Roles limited to another tenant than
    /// `tenant_code` are kept (they are what the claim said) but never hold: the caller acts only in
    /// its own tenant.
    ///
    /// ```
    /// use cqrs_caller::{Caller, Role};
    /// let c = Caller::with_roles("u", "t1", vec![Role::in_tenant("system_admin", "t2")]);
    /// assert!(!c.is_system_admin());
    /// assert!(!c.has_role("system_admin"));
    /// assert!(c.authorize_write("PRODUCT#t2").is_err());
    /// ```
    pub fn with_roles(
        user_id: impl Into<String>,
        tenant_code: impl Into<String>,
        roles: Vec<Role>,
    ) -> Self {
        Caller {
            user_id: user_id.into(),
            tenant_code: tenant_code.into(),
            roles,
        }
    }

    /// Whether the caller holds a global `system_admin` (no tenant): the only role that writes
    /// `common` and acts for other tenants. A `system_admin` limited to a tenant does not count.
    ///
    /// ```
    /// use cqrs_caller::{Caller, Role};
    /// assert!(!Caller::new("u", "t", vec![]).is_system_admin());
    /// let scoped = Caller::with_roles("u", "t1", vec![Role::in_tenant("system_admin", "t1")]);
    /// assert!(!scoped.is_system_admin());
    /// assert!(scoped.has_role("system_admin"));
    /// ```
    pub fn is_system_admin(&self) -> bool {
        self.roles
            .iter()
            .any(|r| r.is_global() && r.name == SYSTEM_ADMIN)
    }

    /// Whether the caller holds `role` in its own tenant: globally, or limited to its tenant.
    ///
    /// ```
    /// use cqrs_caller::{Caller, Role};
    /// let c = Caller::with_roles("u", "t1", vec![Role::in_tenant("editor", "t1"), Role::in_tenant("owner", "t2")]);
    /// assert!(c.has_role("editor"));
    /// assert!(!c.has_role("owner"));
    /// ```
    pub fn has_role(&self, role: &str) -> bool {
        self.roles
            .iter()
            .any(|r| r.name == role && r.holds_in(&self.tenant_code))
    }

    /// Whether the caller may see the audit fields (`createdBy`, `createdIp`, `updatedBy`,
    /// `updatedIp`, `requestId`) of an item of `item_tenant`: its own tenant's items, or any item
    /// for a global `system_admin`.
    ///
    /// ```
    /// let c = cqrs_caller::Caller::new("u", "t1", vec![]);
    /// assert!(c.sees_audit_of("t1"));
    /// assert!(!c.sees_audit_of("common"));
    /// ```
    pub fn sees_audit_of(&self, item_tenant: &str) -> bool {
        self.is_system_admin() || (!item_tenant.is_empty() && item_tenant == self.tenant_code)
    }

    /// May the caller read items under `pk`? Its own tenant and `common`: yes; another tenant: only
    /// a `system_admin`. A pk without a tenant segment is refused.
    ///
    /// ```
    /// let c = cqrs_caller::Caller::new("u", "t1", vec![]);
    /// assert!(c.authorize_read("LOG#t1#2024-01").is_ok());
    /// assert_eq!(c.authorize_read("PRODUCT").unwrap_err().status(), 403);
    /// ```
    pub fn authorize_read(&self, pk: &str) -> Result<(), ApiError> {
        let tenant = self.pk_tenant(pk)?;
        if tenant == self.tenant_code || tenant == TENANT_COMMON || self.is_system_admin() {
            Ok(())
        } else {
            Err(ApiError::Forbidden(format!(
                "tenant {tenant:?} of pk {pk:?} is not the caller's tenant {:?}",
                self.tenant_code
            )))
        }
    }

    /// May the caller read items under `pk`, where a `common` partition may be kept from tenants?
    /// The tenant rules of [`Caller::authorize_read`] first; then, for a pk of the `common` tenant
    /// and a caller who is not a global `system_admin`, `common_readers` says who may read that
    /// partition ([`Caller::authorize_common_read`]). `common_readers` is called only then: a read
    /// of the caller's own tenant (or by a global `system_admin`) never runs it, so it may load
    /// something (the entity model) without slowing those reads. Its error is returned as it is.
    ///
    /// ```
    /// use cqrs_caller::{Caller, Readers};
    /// use cqrs_problem::ApiError;
    ///
    /// let t1 = Caller::new("u", "t1", vec![]);
    /// let never = || -> Result<Readers, ApiError> { panic!("not asked for the caller's own tenant") };
    /// assert!(t1.authorize_read_with("PRODUCT#t1", never).is_ok());
    /// assert_eq!(t1.authorize_read_with("PRODUCT#t2", never).unwrap_err().status(), 403);
    /// assert_eq!(t1.authorize_read_with("USER_TENANT#common", || Ok(Readers::SystemAdmin)).unwrap_err().status(), 403);
    /// assert!(t1.authorize_read_with("MASTER#common", || Ok(Readers::Everyone)).is_ok());
    ///
    /// let root = Caller::new("root", "t1", vec!["system_admin".into()]);
    /// assert!(root.authorize_read_with("USER_TENANT#common", never).is_ok());
    /// ```
    pub fn authorize_read_with(
        &self,
        pk: &str,
        common_readers: impl FnOnce() -> Result<Readers, ApiError>,
    ) -> Result<(), ApiError> {
        self.authorize_read(pk)?;
        if self.is_system_admin() || self.pk_tenant(pk)? != TENANT_COMMON {
            return Ok(());
        }
        self.authorize_common_read(pk, common_readers()?)
    }

    /// May the caller read what `readers` allows, e.g. an access pattern over common entities or
    /// the partition `what` of `common`? [`Readers::Everyone`]: yes; [`Readers::SystemAdmin`]:
    /// only a global `system_admin` (a `system_admin` role scoped to a tenant, even the caller's
    /// own, and a caller whose own tenant claim is `common` do not count). `what` names the
    /// refused read in the problem's detail.
    ///
    /// ```
    /// use cqrs_caller::{Caller, Readers, Role};
    /// let scoped = Caller::with_roles("u", "t1", vec![Role::in_tenant("system_admin", "t1")]);
    /// assert!(scoped.authorize_common_read("USER#common", Readers::SystemAdmin).is_err());
    /// let root = Caller::new("root", "t1", vec!["system_admin".into()]);
    /// assert!(root.authorize_common_read("USER#common", Readers::SystemAdmin).is_ok());
    /// ```
    pub fn authorize_common_read(&self, what: &str, readers: Readers) -> Result<(), ApiError> {
        match readers {
            Readers::Everyone => Ok(()),
            Readers::SystemAdmin if self.is_system_admin() => Ok(()),
            Readers::SystemAdmin => Err(ApiError::Forbidden(format!(
                "{what} holds items of the {TENANT_COMMON} tenant that only a global \
                 {SYSTEM_ADMIN} reads (the entity model's `read = \"{SYSTEM_ADMIN}\"`)"
            ))),
        }
    }

    /// May the caller write items under `pk`? Its own tenant: yes; `common` or another tenant: only
    /// a `system_admin`.
    ///
    /// ```
    /// let c = cqrs_caller::Caller::new("u", "t1", vec![]);
    /// assert!(c.authorize_write("PRODUCT#t1").is_ok());
    /// assert!(c.authorize_write("PRODUCT#t10").is_err());
    /// ```
    pub fn authorize_write(&self, pk: &str) -> Result<(), ApiError> {
        let tenant = self.pk_tenant(pk)?;
        if self.is_system_admin() {
            return Ok(());
        }
        if tenant == TENANT_COMMON {
            return Err(ApiError::Forbidden(format!(
                "only {SYSTEM_ADMIN} may write the {TENANT_COMMON} tenant"
            )));
        }
        if tenant != self.tenant_code {
            return Err(ApiError::Forbidden(format!(
                "tenant {tenant:?} of pk {pk:?} is not the caller's tenant {:?}",
                self.tenant_code
            )));
        }
        Ok(())
    }

    fn pk_tenant<'a>(&self, pk: &'a str) -> Result<&'a str, ApiError> {
        match tenant_code(pk) {
            Some(tenant) if !tenant.is_empty() => Ok(tenant),
            _ => Err(ApiError::Forbidden(format!(
                "pk {pk:?} names no tenant (expected PREFIX#TENANT)"
            ))),
        }
    }

    /// Reads the caller of `request`: from the JWT authorizer claims, or with
    /// [`CallerMode::Local`] and a request that carries no authorizer context at all, from the
    /// local headers. Claims, when present, always win: in local mode a request with claims is
    /// read from its claims and its `x-*` headers are ignored. No caller is a 401.
    ///
    /// ```
    /// use cqrs_caller::{Caller, CallerMode};
    /// let request = lambda_http::http::Request::builder()
    ///     .header("x-tenant-code", "t1")
    ///     .header("x-user-id", "u1")
    ///     .header("x-roles", "viewer, system_admin")
    ///     .body(lambda_http::Body::Empty)
    ///     .unwrap();
    /// let caller = Caller::from_request(&request, CallerMode::Local).unwrap();
    /// assert_eq!(caller, Caller::new("u1", "t1", vec!["viewer".into(), "system_admin".into()]));
    /// // The same headers without local mode are no caller at all.
    /// assert_eq!(Caller::from_request(&request, CallerMode::Jwt).unwrap_err().status(), 401);
    /// ```
    pub fn from_request(request: &Request, mode: CallerMode) -> Result<Caller, ApiError> {
        match mode {
            CallerMode::Local if !has_authorizer(request) => Self::from_headers(request),
            CallerMode::Jwt | CallerMode::Local => {
                let names = ClaimNames::configured().map_err(ApiError::Internal)?;
                Self::from_claims(request, names)
            }
        }
    }

    /// [`Caller::from_request`] with these claim names rather than the process's
    /// ([`ClaimNames::configured`]).
    ///
    /// ```
    /// use cqrs_caller::{Caller, CallerMode, ClaimNames};
    /// let names = ClaimNames::parse(Some("tenant_id"), Some("groups")).unwrap();
    /// // Local headers are read as they are, whatever the claim names.
    /// let request = lambda_http::http::Request::builder()
    ///     .header("x-tenant-code", "t1")
    ///     .header("x-user-id", "u1")
    ///     .body(lambda_http::Body::Empty)
    ///     .unwrap();
    /// let caller = Caller::from_request_with(&request, CallerMode::Local, &names).unwrap();
    /// assert_eq!(caller, Caller::new("u1", "t1", vec![]));
    /// ```
    pub fn from_request_with(
        request: &Request,
        mode: CallerMode,
        names: &ClaimNames,
    ) -> Result<Caller, ApiError> {
        match mode {
            CallerMode::Local if !has_authorizer(request) => Self::from_headers(request),
            CallerMode::Jwt | CallerMode::Local => Self::from_claims(request, names),
        }
    }

    fn from_claims(request: &Request, names: &ClaimNames) -> Result<Caller, ApiError> {
        let claims = match request.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(context)) => context
                .authorizer
                .as_ref()
                .and_then(|a| a.jwt.as_ref())
                .map(|jwt| &jwt.claims),
            _ => None,
        };
        let Some(claims) = claims else {
            return Err(ApiError::Unauthenticated(
                "no JWT authorizer claims on the request".into(),
            ));
        };
        let claim = |name: &str| claims.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
        let user_id = claim("sub")
            .ok_or_else(|| ApiError::Unauthenticated("the JWT has no `sub` claim".into()))?;
        let tenant = claim(&names.tenant).ok_or_else(|| {
            ApiError::Forbidden(format!(
                "the JWT has no `{}` claim (the tenant claim, {TENANT_CLAIM_VAR})",
                names.tenant
            ))
        })?;
        let roles = claim(&names.roles).map(parse_roles).unwrap_or_default();
        Ok(Caller::with_roles(user_id, tenant, roles))
    }

    fn from_headers(request: &Request) -> Result<Caller, ApiError> {
        let header = |name: &str| -> Result<Option<&str>, ApiError> {
            match request.headers().get(name) {
                None => Ok(None),
                Some(value) => value
                    .to_str()
                    .map(|v| Some(v.trim()).filter(|v| !v.is_empty()))
                    .map_err(|_| ApiError::bad_field(name, "is not visible ASCII")),
            }
        };
        let tenant = header("x-tenant-code")?;
        let user = header("x-user-id")?;
        match (tenant, user) {
            (Some(tenant), Some(user)) => {
                let roles = header("x-roles")?.map(parse_roles).unwrap_or_default();
                Ok(Caller::with_roles(user, tenant, roles))
            }
            _ => Err(ApiError::Unauthenticated(
                "CALLER_MODE=local needs the x-tenant-code and x-user-id headers".into(),
            )),
        }
    }
}

/// Whether API Gateway put any authorizer context on the request (JWT claims, a Lambda
/// authorizer's context, IAM): then the request's caller comes from there, never from headers.
fn has_authorizer(request: &Request) -> bool {
    match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => {
            context.authorizer.as_ref().is_some_and(|authorizer| {
                authorizer.jwt.is_some()
                    || authorizer.iam.is_some()
                    || !authorizer.fields.is_empty()
            })
        }
        _ => false,
    }
}

/// The request id of `request`: the Lambda invocation's, else API Gateway's, else empty.
///
/// ```
/// let request = lambda_http::http::Request::new(lambda_http::Body::Empty);
/// assert_eq!(cqrs_caller::request_id(&request), "");
/// ```
pub fn request_id(request: &Request) -> String {
    if let Some(context) = request.lambda_context_ref()
        && !context.request_id.is_empty()
    {
        return context.request_id.clone();
    }
    match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => {
            context.request_id.clone().unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// The address the request came from (API Gateway's `sourceIp`), or empty.
///
/// ```
/// let request = lambda_http::http::Request::new(lambda_http::Body::Empty);
/// assert_eq!(cqrs_caller::source_ip(&request), "");
/// ```
pub fn source_ip(request: &Request) -> String {
    match request.request_context_ref() {
        Some(RequestContext::ApiGatewayV2(context)) => {
            context.http.source_ip.clone().unwrap_or_default()
        }
        _ => String::new(),
    }
}

/// The path of the request as the client sent it, still percent-encoded: API Gateway's `rawPath`,
/// else the URI's path.
///
/// ```
/// let request = lambda_http::http::Request::builder()
///     .uri("/items/PRODUCT%23t1")
///     .body(lambda_http::Body::Empty)
///     .unwrap();
/// assert_eq!(cqrs_caller::request_path(&request), "/items/PRODUCT%23t1");
/// ```
pub fn request_path(request: &Request) -> String {
    let raw = request.raw_http_path();
    if raw.is_empty() {
        request.uri().path().to_string()
    } else {
        raw.to_string()
    }
}

/// Parses a roles claim or header: a comma- or space-separated list, a JSON array of strings, API
/// Gateway's rendering of an array claim (`[a b]`), or mbc-cqrs-serverless' JSON array of
/// `{"tenant": ..., "role": ...}` objects.
///
/// Plain names are global roles. An object's role is global only when its `tenant` is absent or
/// `""`; with a tenant it is limited to that tenant. An object whose `tenant` is not a string
/// (`null`, a number, ...) or that has no string `role` gives nothing, and so does a value that
/// looks like JSON (it starts with `[` and holds `{` or `"`) but does not parse: an unclear claim
/// never widens what a caller may do.
///
/// ```
/// use cqrs_caller::{Role, parse_roles};
/// assert_eq!(parse_roles("a, b"), [Role::global("a"), Role::global("b")]);
/// assert_eq!(parse_roles(r#"["a","b"]"#), [Role::global("a"), Role::global("b")]);
/// assert_eq!(parse_roles("[a b]"), [Role::global("a"), Role::global("b")]);
/// assert_eq!(parse_roles(r#"[{"tenant":"","role":"system_admin"}]"#), [Role::global("system_admin")]);
/// assert_eq!(
///     parse_roles(r#"[{"tenant":"t2","role":"system_admin"}]"#),
///     [Role::in_tenant("system_admin", "t2")]
/// );
/// assert_eq!(parse_roles(r#"[{"tenant":"t2","role":"x"}, system_admin]"#), []);
/// ```
pub fn parse_roles(value: &str) -> Vec<Role> {
    let value = value.trim();
    if value.starts_with('[') {
        match serde_json::from_str(value) {
            Ok(serde_json::Value::Array(entries)) => {
                return entries.iter().filter_map(role_of_entry).collect();
            }
            _ if value.contains(['{', '"']) => return Vec::new(),
            _ => {}
        }
    }
    value
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split([',', ' '])
        .map(str::trim)
        .filter(|role| !role.is_empty())
        .map(Role::global)
        .collect()
}

/// One entry of a JSON roles array: a role name (global), or mbc's `{"tenant", "role"}` object.
fn role_of_entry(entry: &serde_json::Value) -> Option<Role> {
    let non_empty = |text: &str| Some(text.trim().to_string()).filter(|t| !t.is_empty());
    match entry {
        serde_json::Value::String(role) => non_empty(role).map(Role::global),
        serde_json::Value::Object(map) => {
            let name = non_empty(map.get("role")?.as_str()?)?;
            match map.get("tenant") {
                None => Some(Role::global(name)),
                Some(serde_json::Value::String(tenant)) => match non_empty(tenant) {
                    None => Some(Role::global(name)),
                    Some(tenant) => Some(Role::in_tenant(name, tenant)),
                },
                Some(_) => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lambda_http::Body;

    fn jwt_request(claims: serde_json::Value) -> Request {
        let event = serde_json::json!({
            "version": "2.0",
            "routeKey": "POST /commands",
            "rawPath": "/commands",
            "rawQueryString": "",
            "headers": {"x-tenant-code": "evil", "x-user-id": "evil"},
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "api",
                "authorizer": {"jwt": {"claims": claims, "scopes": null}},
                "domainName": "example.test",
                "domainPrefix": "api",
                "http": {"method": "POST", "path": "/commands", "protocol": "HTTP/1.1",
                         "sourceIp": "192.0.2.1", "userAgent": "test"},
                "requestId": "r1",
                "routeKey": "POST /commands",
                "stage": "$default",
                "time": "01/Jan/2026:00:00:00 +0000",
                "timeEpoch": 0
            },
            "isBase64Encoded": false
        });
        lambda_http::request::from_str(&event.to_string()).unwrap()
    }

    #[test]
    fn claims_give_the_caller_and_headers_are_ignored() {
        let request = jwt_request(serde_json::json!({
            "sub": "u1", "custom:tenant": "t1", "custom:roles": "[admin system_admin]"
        }));
        let caller = Caller::from_request(&request, CallerMode::Jwt).unwrap();
        assert_eq!(
            caller,
            Caller::new("u1", "t1", vec!["admin".into(), "system_admin".into()])
        );
    }

    #[test]
    fn claims_are_read_by_the_names_given() {
        let request = jwt_request(serde_json::json!({
            "sub": "u1", "tenant_id": "t7", "groups": "[editor system_admin]",
            "custom:tenant": "t1", "custom:roles": "viewer"
        }));
        let names = ClaimNames::parse(Some("tenant_id"), Some("groups")).unwrap();
        for mode in [CallerMode::Jwt, CallerMode::Local] {
            let caller = Caller::from_request_with(&request, mode, &names).unwrap();
            assert_eq!(
                caller,
                Caller::new("u1", "t7", vec!["editor".into(), "system_admin".into()])
            );
        }
        // The defaults ignore tenant_id and groups.
        let caller =
            Caller::from_request_with(&request, CallerMode::Jwt, &ClaimNames::default()).unwrap();
        assert_eq!(caller, Caller::new("u1", "t1", vec!["viewer".into()]));
        // A token without the configured tenant claim is refused, naming the claim.
        let names = ClaimNames::parse(Some("org"), None).unwrap();
        let refusal = Caller::from_request_with(&request, CallerMode::Jwt, &names).unwrap_err();
        assert_eq!(refusal.status(), 403);
        assert!(refusal.to_string().contains("`org`"), "{refusal}");
    }

    #[test]
    fn claims_without_tenant_are_forbidden_and_without_sub_unauthenticated() {
        let no_tenant = jwt_request(serde_json::json!({"sub": "u1"}));
        assert_eq!(
            Caller::from_request(&no_tenant, CallerMode::Jwt)
                .unwrap_err()
                .status(),
            403
        );
        let no_sub = jwt_request(serde_json::json!({"custom:tenant": "t1"}));
        assert_eq!(
            Caller::from_request(&no_sub, CallerMode::Jwt)
                .unwrap_err()
                .status(),
            401
        );
    }

    #[test]
    fn local_mode_needs_both_headers() {
        let request = lambda_http::http::Request::builder()
            .header("x-tenant-code", "t1")
            .body(Body::Empty)
            .unwrap();
        assert_eq!(
            Caller::from_request(&request, CallerMode::Local)
                .unwrap_err()
                .status(),
            401
        );
    }

    #[test]
    fn tenant_rules() {
        let user = Caller::new("u", "t1", vec!["admin".into()]);
        let admin = Caller::new("a", "t1", vec![SYSTEM_ADMIN.into()]);
        for pk in ["PRODUCT#t1", "ORDER#t1#x", "LOG#t1#2024-01"] {
            assert!(user.authorize_write(pk).is_ok(), "{pk}");
        }
        for pk in [
            "PRODUCT#t2",
            "PRODUCT#T1",
            "PRODUCT#t1x",
            "MASTER#common",
            "PRODUCT#",
            "PRODUCT",
        ] {
            assert_eq!(user.authorize_write(pk).unwrap_err().status(), 403, "{pk}");
        }
        assert!(user.authorize_read("MASTER#common").is_ok());
        assert!(user.authorize_read("PRODUCT#t2").is_err());
        assert!(admin.authorize_write("MASTER#common").is_ok());
        assert!(admin.authorize_write("PRODUCT#t2").is_ok());
        assert!(admin.authorize_write("PRODUCT").is_err());
    }

    #[test]
    fn scoped_roles_hold_only_in_the_callers_own_tenant() {
        let claims = |roles: &str| {
            jwt_request(serde_json::json!({
                "sub": "u1", "custom:tenant": "t1", "custom:roles": roles
            }))
        };
        // Another tenant's system_admin: nothing in t1, and not global.
        let other = Caller::from_request(
            &claims(r#"[{"tenant":"t2","role":"system_admin"}]"#),
            CallerMode::Jwt,
        )
        .unwrap();
        assert!(!other.is_system_admin());
        assert!(!other.has_role(SYSTEM_ADMIN));
        for pk in ["MASTER#common", "PRODUCT#t2", "PRODUCT#t3"] {
            assert_eq!(other.authorize_write(pk).unwrap_err().status(), 403, "{pk}");
        }
        assert!(other.authorize_read("PRODUCT#t2").is_err());
        // Its own tenant's system_admin: an admin of t1 only.
        let own = Caller::from_request(
            &claims(r#"[{"tenant":"t1","role":"system_admin"}]"#),
            CallerMode::Jwt,
        )
        .unwrap();
        assert!(!own.is_system_admin());
        assert!(own.has_role(SYSTEM_ADMIN));
        assert!(own.authorize_write("PRODUCT#t1").is_ok());
        assert!(own.authorize_write("MASTER#common").is_err());
        assert!(own.authorize_write("PRODUCT#t2").is_err());
        assert!(!own.sees_audit_of("common"));
        // No tenant, or "": global.
        for roles in [
            r#"[{"tenant":"","role":"system_admin"}]"#,
            r#"[{"role":"system_admin"}]"#,
            r#"[{"tenant":"  ","role":"system_admin"}]"#,
        ] {
            let global = Caller::from_request(&claims(roles), CallerMode::Jwt).unwrap();
            assert!(global.is_system_admin(), "{roles}");
            assert!(global.authorize_write("MASTER#common").is_ok(), "{roles}");
        }
        // A tenant that is not a string, or JSON that does not parse: nothing.
        for roles in [
            r#"[{"tenant":null,"role":"system_admin"}]"#,
            r#"[{"tenant":7,"role":"system_admin"}]"#,
            r#"[{"tenant":"t2","role":"x"}, system_admin]"#,
            r#"[{"tenant":"t2","role":"system_admin"}"#,
        ] {
            let caller = Caller::from_request(&claims(roles), CallerMode::Jwt).unwrap();
            assert!(caller.roles.is_empty(), "{roles}: {caller:?}");
        }
    }

    #[test]
    fn restricted_common_partitions_need_a_global_system_admin() {
        let restricted = || Ok(Readers::SystemAdmin);
        let denied = [
            Caller::new("u", "t1", vec!["admin".into()]),
            // Its own tenant's system_admin, another tenant's, a caller of the `common` tenant.
            Caller::with_roles("u", "t1", vec![Role::in_tenant(SYSTEM_ADMIN, "t1")]),
            Caller::with_roles("u", "t1", vec![Role::in_tenant(SYSTEM_ADMIN, "t2")]),
            Caller::new("u", TENANT_COMMON, vec!["admin".into()]),
            Caller::with_roles(
                "u",
                TENANT_COMMON,
                vec![Role::in_tenant(SYSTEM_ADMIN, "common")],
            ),
        ];
        for caller in &denied {
            let refusal = caller
                .authorize_read_with("USER_TENANT#common", restricted)
                .unwrap_err();
            assert_eq!(refusal.status(), 403, "{caller:?}");
            // The tenant rules come first: another tenant is refused without asking the model.
            assert_eq!(
                caller
                    .authorize_read_with("PRODUCT#t9", || panic!("asked"))
                    .unwrap_err()
                    .status(),
                403
            );
        }
        let root = Caller::new("root", "t1", vec![SYSTEM_ADMIN.into()]);
        assert!(
            root.authorize_read_with("USER_TENANT#common", || panic!("asked"))
                .is_ok()
        );
        // The rule's own failure (a model that does not load) is the answer.
        let user = Caller::new("u", "t1", vec![]);
        let failed = user
            .authorize_read_with("MASTER#common", || {
                Err(ApiError::Internal("no model".into()))
            })
            .unwrap_err();
        assert_eq!(failed.status(), 500);
    }

    #[test]
    fn claims_win_over_local_headers_in_local_mode() {
        // jwt_request carries x-tenant-code: evil and x-user-id: evil.
        let request = jwt_request(serde_json::json!({"sub": "u1", "custom:tenant": "t1"}));
        let caller = Caller::from_request(&request, CallerMode::Local).unwrap();
        assert_eq!(caller, Caller::new("u1", "t1", vec![]));
        // Claims that are no caller stay no caller: the headers are not a fallback.
        let request = jwt_request(serde_json::json!({}));
        assert_eq!(
            Caller::from_request(&request, CallerMode::Local)
                .unwrap_err()
                .status(),
            401
        );
    }
}
