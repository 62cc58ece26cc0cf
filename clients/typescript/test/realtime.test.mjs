// The realtime API's onSubscribe handler (tools/cli/src/new/realtime/on-subscribe.js, APPSYNC_JS)
// under Node: AppSync has no local emulator, so the handler's text is loaded as an ES module with
// its `@aws-appsync/utils` import replaced by a stub whose util.unauthorized() throws, and run on a
// table of subscriptions: own tenant, `common`, another tenant, wildcards, missing segments and
// claims, the roles claim in each form cqrs-caller reads (comma list, `[a b]`, JSON array, mbc's
// {tenant, role} objects). The same handler text is then linted with @aws-appsync/eslint-plugin
// (the APPSYNC_JS subset).
//
//   node --test test/realtime.test.mjs                 (from clients/typescript, after npm ci)
//
// `checkOnSubscribe(text)` is exported so that a test of the template can run the same table on
// the CodeHandlers text the transformed template deploys (Fn::Sub's placeholders still in it, or
// already filled with the default claim names).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const HANDLER_PATH = fileURLToPath(
  new URL('../../../tools/cli/src/new/realtime/on-subscribe.js', import.meta.url),
);

/** The placeholders Fn::Sub fills in the handler's text, and nothing else. */
export const PLACEHOLDERS = ['CommonReaders', 'RolesClaim', 'TenantClaim'];

const IMPORT_LINE = "import { util } from '@aws-appsync/utils';";
const UNAUTHORIZED = 'realtime-test: util.unauthorized()';

/**
 * Fills `${Name}` as Fn::Sub does (every `${...}` must be one of `vars`, `${!x}` is a literal
 * `${x}`), replaces the utils import with the stub and imports the module.
 */
export async function loadOnSubscribe(text, vars) {
  const substituted = text.replace(/\$\{([^}]*)\}/g, (whole, name) => {
    if (name.startsWith('!')) return '${' + name.slice(1) + '}';
    assert.ok(Object.hasOwn(vars, name), `Fn::Sub would fail: \${${name}} is no parameter or variable`);
    return vars[name];
  });
  assert.equal(
    substituted.split(IMPORT_LINE).length,
    2,
    `the handler imports util exactly once, as: ${IMPORT_LINE}`,
  );
  const stub =
    'const util = { unauthorized() { throw new Error(' + JSON.stringify(UNAUTHORIZED) + '); } };';
  const module = substituted.replace(IMPORT_LINE, stub);
  const loaded = await import('data:text/javascript;base64,' + Buffer.from(module).toString('base64'));
  assert.equal(typeof loaded.onSubscribe, 'function', 'the module exports onSubscribe');
  return loaded.onSubscribe;
}

/** `allowed`, `unauthorized` (util.unauthorized()) or `error: ...` (anything else thrown). */
function outcome(onSubscribe, path, claims) {
  const segments = path.split('/').filter((s) => s !== '');
  const ctx = {
    identity: claims === undefined ? undefined : { sub: 'u1', issuer: 'https://idp.example', claims },
    info: { channel: { path, segments }, channelNamespace: { name: segments[0] }, operation: 'SUBSCRIBE' },
    request: { headers: {} },
    stash: {},
  };
  try {
    onSubscribe(ctx);
    return 'allowed';
  } catch (e) {
    return e instanceof Error && e.message === UNAUTHORIZED ? 'unauthorized' : `error: ${e}`;
  }
}

const T1 = (roles) => (roles === undefined ? { 'custom:tenant': 't1' } : { 'custom:tenant': 't1', 'custom:roles': roles });

/** [channel, claims, expected]: expected `allowed`, `unauthorized`, or `refused` (unauthorized or an error). */
const EVERYONE_CASES = [
  // Own tenant, and below it (a wildcard inside one's own tenant is fine).
  ['/order/t1', T1(), 'allowed'],
  ['/order/t1/k3Qm9x', T1(), 'allowed'],
  ['/order/t1/*', T1(), 'allowed'],
  ['/order/t1', { 'custom:tenant': '  t1  ' }, 'allowed'],
  ['/order/7', { 'custom:tenant': 7 }, 'allowed'],
  ['/order/t1', { 'custom:tenant': ['t1'] }, 'unauthorized'],
  // common: everyone reads it (DESIGN.md, tenant rules).
  ['/order/common', T1(), 'allowed'],
  ['/order/common/k3Qm9x', T1(), 'allowed'],
  // Another tenant, a wildcard tenant, no tenant segment.
  ['/order/t2', T1(), 'unauthorized'],
  ['/order/t2/k3Qm9x', T1(), 'unauthorized'],
  ['/order/T1', T1(), 'unauthorized'],
  ['/order/*', T1(), 'unauthorized'],
  ['/order/t*', T1(), 'unauthorized'],
  ['/order', T1(), 'unauthorized'],
  // No tenant claim, an empty one, no identity at all: nothing, not even common.
  ['/order/t1', {}, 'unauthorized'],
  ['/order/common', {}, 'unauthorized'],
  ['/order/t1', { 'custom:tenant': '   ' }, 'unauthorized'],
  ['/order/common', undefined, 'unauthorized'],
  ['/order/t1', { 'custom:roles': 'system_admin' }, 'unauthorized'],
  // A global system_admin, in every form the roles claim takes: any tenant.
  ['/order/t2', T1('system_admin'), 'allowed'],
  ['/order/t2', T1('viewer, system_admin'), 'allowed'],
  ['/order/t2', T1('viewer system_admin'), 'allowed'],
  ['/order/t2', T1('[admin system_admin]'), 'allowed'],
  ['/order/t2', T1('[[system_admin]]'), 'allowed'],
  ['/order/t2', T1('["viewer","system_admin"]'), 'allowed'],
  ['/order/t2', T1('[{"tenant":"","role":"system_admin"}]'), 'allowed'],
  ['/order/t2', T1('[{"tenant":"  ","role":"system_admin"}]'), 'allowed'],
  ['/order/t2', T1('[{"role":"system_admin"}]'), 'allowed'],
  ['/order/t2', T1(['system_admin']), 'allowed'],
  ['/order/t2', T1([{ role: 'system_admin' }]), 'allowed'],
  // ... but never a wildcard across tenants, and never without a tenant claim.
  ['/order/*', T1('system_admin'), 'unauthorized'],
  ['/order', T1('system_admin'), 'unauthorized'],
  // Roles that are not a global system_admin.
  ['/order/t2', T1('admin'), 'unauthorized'],
  ['/order/t2', T1('System_Admin'), 'unauthorized'],
  ['/order/t2', T1('system_admin_x'), 'unauthorized'],
  ['/order/t2', T1('[{"tenant":"t2","role":"system_admin"}]'), 'unauthorized'],
  ['/order/t2', T1('[{"tenant":"t1","role":"system_admin"}]'), 'unauthorized'],
  ['/order/t2', T1([{ tenant: 't2', role: 'system_admin' }]), 'unauthorized'],
  ['/order/t2', T1('[{"tenant":null,"role":"system_admin"}]'), 'unauthorized'],
  ['/order/t2', T1('[{"tenant":7,"role":"system_admin"}]'), 'unauthorized'],
  ['/order/t2', T1('[{"tenant":"","role":7}]'), 'unauthorized'],
  ['/order/t2', T1('{"role":"system_admin"}'), 'unauthorized'],
  ['/order/t2', T1(7), 'unauthorized'],
  // JSON that does not parse: nothing (cqrs-caller: no roles), here the handler stops.
  ['/order/t2', T1('[{"tenant":"t2","role":"x"}, system_admin]'), 'refused'],
  ['/order/t2', T1('[{"tenant":"","role":"system_admin"}'), 'refused'],
  // The tenant-scoped system_admin of one's own tenant still reads that tenant.
  ['/order/t1', T1('[{"tenant":"t1","role":"system_admin"}]'), 'allowed'],
];

/** A namespace whose entity is read by a global system_admin only (`read = "system_admin"`). */
const RESTRICTED_CASES = [
  ['/user-tenant/common', T1(), 'unauthorized'],
  ['/user-tenant/common', { 'custom:tenant': 'common' }, 'unauthorized'],
  ['/user-tenant/common', T1('[{"tenant":"t1","role":"system_admin"}]'), 'unauthorized'],
  ['/user-tenant/common', { 'custom:tenant': 'common', 'custom:roles': '[{"tenant":"common","role":"system_admin"}]' }, 'unauthorized'],
  ['/user-tenant/common', T1('system_admin'), 'allowed'],
  ['/user-tenant/t1', T1(), 'allowed'],
  ['/user-tenant/t2', T1(), 'unauthorized'],
  ['/user-tenant/t2', T1('system_admin'), 'allowed'],
];

/** Claim names other than the defaults: the handler reads the names it was given. */
const NAMED_CASES = [
  ['/order/t1', { tenant_id: 't1' }, 'allowed'],
  ['/order/t2', { tenant_id: 't1', 'cognito:groups': ['admin', 'system_admin'] }, 'allowed'],
  ['/order/t2', { tenant_id: 't1', 'custom:roles': 'system_admin' }, 'unauthorized'],
  ['/order/t1', { 'custom:tenant': 't1' }, 'unauthorized'],
];

function runTable(onSubscribe, cases) {
  const wrong = [];
  for (const [path, claims, expected] of cases) {
    const got = outcome(onSubscribe, path, claims);
    const ok = expected === 'refused' ? got !== 'allowed' : got === expected;
    if (!ok) wrong.push(`${path} with ${JSON.stringify(claims)}: expected ${expected}, got ${got}`);
  }
  assert.deepEqual(wrong, [], 'every subscription decided as cqrs-caller decides a read');
  return cases.length;
}

/**
 * Runs every table on `text`, the handler as the template embeds it: with Fn::Sub's placeholders
 * (filled here as the template fills them), or already rendered for the default claim names
 * (`custom:tenant`, `custom:roles`) and the namespace's `commonReaders`. Returns the number of
 * cases run.
 */
export async function checkOnSubscribe(text, { commonReaders } = {}) {
  const placeholders = [...new Set([...text.matchAll(/\$\{([^!}][^}]*)\}/g)].map((m) => m[1]))].sort();
  let count = 0;
  if (placeholders.length === 0) {
    // Rendered text: it can only be checked for the names and the rule it was rendered with.
    const onSubscribe = await loadOnSubscribe(text, {});
    count += runTable(onSubscribe, commonReaders === 'system_admin' ? RESTRICTED_CASES : EVERYONE_CASES);
    return count;
  }
  assert.deepEqual(placeholders, PLACEHOLDERS, 'the handler text holds exactly the placeholders Fn::Sub fills');
  const defaults = { TenantClaim: 'custom:tenant', RolesClaim: 'custom:roles' };
  count += runTable(await loadOnSubscribe(text, { ...defaults, CommonReaders: 'everyone' }), EVERYONE_CASES);
  count += runTable(await loadOnSubscribe(text, { ...defaults, CommonReaders: 'system_admin' }), RESTRICTED_CASES);
  // A CommonReaders that is neither value fails closed.
  count += runTable(await loadOnSubscribe(text, { ...defaults, CommonReaders: 'Everyone' }), RESTRICTED_CASES);
  count += runTable(
    await loadOnSubscribe(text, { TenantClaim: 'tenant_id', RolesClaim: 'cognito:groups', CommonReaders: 'everyone' }),
    NAMED_CASES,
  );
  return count;
}

test('onSubscribe allows what cqrs-caller allows to read, and nothing else', async () => {
  const text = readFileSync(HANDLER_PATH, 'utf8');
  const count = await checkOnSubscribe(text);
  assert.ok(count >= 60, `ran ${count} cases`);
});

test('the table itself fails a handler that lets another tenant in', async () => {
  // The same file with the tenant comparison widened: the check must notice.
  const text = readFileSync(HANDLER_PATH, 'utf8');
  const widened = text.replace('} else if (tenant === own) {', '} else if (tenant !== "") {');
  assert.notEqual(widened, text, 'the comparison to widen was found');
  await assert.rejects(checkOnSubscribe(widened), /expected unauthorized, got allowed/);
});

test('the handler is APPSYNC_JS: @aws-appsync/eslint-plugin (recommended rules) finds nothing', async () => {
  const { ESLint } = await import('eslint');
  const appsync = (await import('@aws-appsync/eslint-plugin')).default;
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  const eslint = new ESLint({
    cwd: root,
    overrideConfigFile: true,
    overrideConfig: [
      {
        files: ['**/*.js'],
        languageOptions: {
          parserOptions: {
            projectService: {
              allowDefaultProject: ['tools/cli/src/new/realtime/*.js'],
              defaultProject: 'clients/typescript/test/realtime.tsconfig.json',
            },
            tsconfigRootDir: root,
          },
        },
      },
      { files: ['**/*.js'], ...appsync.configs.recommended },
    ],
  });
  const [result] = await eslint.lintFiles([HANDLER_PATH]);
  const messages = result.messages.map((m) => `${m.line}:${m.column} ${m.ruleId ?? 'parse'}: ${m.message}`);
  assert.deepEqual(messages, [], 'no APPSYNC_JS violation');
  // And the linter does catch what APPSYNC_JS lacks (so the empty list above means something).
  const [bad] = await eslint.lintText(
    "export function onSubscribe(ctx) { try { JSON.parse('['); } catch (e) { return; } for (let i = 0; i < 2; i++) { } return 'ab'.padStart(3); }\n",
    { filePath: HANDLER_PATH },
  );
  const rules = new Set(bad.messages.map((m) => m.ruleId));
  for (const rule of ['@aws-appsync/no-try', '@aws-appsync/no-for', '@aws-appsync/no-disallowed-methods']) {
    assert.ok(rules.has(rule), `${rule} caught: ${[...rules].join(', ')}`);
  }
});
