// The onSubscribe handler of every channel namespace of the realtime API (AWS AppSync Events,
// template parameter RealtimeEvents). It runs after AppSync verified the caller's OIDC token and
// decides from the token's claims whether the caller may subscribe to the channel:
//
//   /<namespace>/<tenant>[/<item>...]    namespace = the entity (`_` written `-`)
//
// The rules are the HTTP API's read rules (cqrs-caller):
//   - the tenant segment is the caller's own tenant (the tenant claim): allowed;
//   - the tenant segment is `common`: allowed to everyone when the entity is read by everyone,
//     else (model.toml `read = "system_admin"`) only to a global system_admin;
//   - another tenant: only a global system_admin (a role without a tenant; mbc's
//     {"tenant": t, "role": r} objects hold only within their tenant, never across tenants);
//   - a missing or empty tenant segment, a wildcard in it, a missing tenant claim: refused.
// A roles claim is read as cqrs-caller reads it: a comma- or space-separated list, `[a b]`, or a
// JSON array of role names and {"tenant", "role"} objects; one that looks like JSON and does not
// parse refuses the subscription (an unclear claim never widens what a caller may do).
//
// The text is APPSYNC_JS (no try/catch, throw, while, for(;;), regex, ++, `in`, passing
// functions as arguments, recursion): it is linted with @aws-appsync/eslint-plugin and tested
// under Node (clients/typescript/test/realtime.test.mjs).
//
// Filled by CloudFormation's Fn::Sub when the template embeds this text in a namespace's
// CodeHandlers: TenantClaim and RolesClaim are the template's parameters of those names,
// CommonReaders (`everyone` or `system_admin`) is given per namespace in Fn::Sub's variable map.
// These three are the text's only substitutions: nothing else in it may start with a dollar
// sign followed by a brace.
import { util } from '@aws-appsync/utils';

export function onSubscribe(ctx) {
  const tenantClaim = '${TenantClaim}';
  const rolesClaim = '${RolesClaim}';
  const commonReaders = '${CommonReaders}';

  const segments = ctx.info.channel.segments;
  const tenant = segments.length > 1 && typeof segments[1] === 'string' ? segments[1] : '';
  const claims = ctx.identity && ctx.identity.claims ? ctx.identity.claims : {};
  const own = claimText(claims[tenantClaim]);

  let allowed = false;
  if (tenant === '' || tenant.indexOf('*') >= 0 || own === '') {
    allowed = false;
  } else if (tenant === 'common') {
    allowed = commonReaders === 'everyone' || holdsGlobalSystemAdmin(claims[rolesClaim]);
  } else if (tenant === own) {
    allowed = true;
  } else {
    allowed = holdsGlobalSystemAdmin(claims[rolesClaim]);
  }
  if (!allowed) {
    util.unauthorized();
  }
}

// A claim's value as text, trimmed: '' when absent or not a string or number.
function claimText(value) {
  if (typeof value === 'string') {
    return value.trim();
  }
  if (typeof value === 'number') {
    return '' + value;
  }
  return '';
}

// Whether the roles claim holds `system_admin` without a tenant.
function holdsGlobalSystemAdmin(value) {
  let found = false;
  for (const entry of roleEntries(value)) {
    if (globalRoleName(entry) === 'system_admin') {
      found = true;
    }
  }
  return found;
}

// The entries of a roles claim: a JSON array (as the token holds it, or as text), else the names
// of a comma- or space-separated list whose outer brackets are removed.
function roleEntries(value) {
  if (Array.isArray(value)) {
    return value;
  }
  if (typeof value !== 'string') {
    return [];
  }
  const text = value.trim();
  if (text.startsWith('[') && (text.indexOf('{') >= 0 || text.indexOf('"') >= 0)) {
    // Text that is not JSON stops the handler here: the subscription is refused.
    const parsed = JSON.parse(text);
    return Array.isArray(parsed) ? parsed : [];
  }
  const names = [];
  for (const part of withoutTrailing(withoutLeading(text, '['), ']').split(',')) {
    for (const name of part.split(' ')) {
      if (name.trim() !== '') {
        names.push(name.trim());
      }
    }
  }
  return names;
}

// The name of a role that holds in every tenant; '' for a role of one tenant or an entry that is
// not a role.
function globalRoleName(entry) {
  if (typeof entry === 'string') {
    return entry.trim();
  }
  if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
    return '';
  }
  if (typeof entry.role !== 'string') {
    return '';
  }
  if (!Object.hasOwn(entry, 'tenant')) {
    return entry.role.trim();
  }
  if (typeof entry.tenant !== 'string' || entry.tenant.trim() !== '') {
    return '';
  }
  return entry.role.trim();
}

// `text` without the `mark` characters it starts with.
function withoutLeading(text, mark) {
  let out = '';
  let leading = true;
  for (const ch of text) {
    if (!(leading && ch === mark)) {
      leading = false;
      out = out + ch;
    }
  }
  return out;
}

// `text` without the `mark` characters it ends with.
function withoutTrailing(text, mark) {
  let out = '';
  let pending = '';
  for (const ch of text) {
    if (ch === mark) {
      pending = pending + ch;
    } else {
      out = out + pending + ch;
      pending = '';
    }
  }
  return out;
}
