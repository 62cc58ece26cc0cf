-- The relational read model of the service's model.toml (cqrs model sql).
DO $$ BEGIN
  CREATE ROLE "cqrs_reader" NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;
DO $$
DECLARE
  modern boolean := current_setting('server_version_num')::int >= 160000;
BEGIN
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'cqrs_reader')
     AND NOT pg_has_role(current_user, 'cqrs_reader', CASE WHEN modern THEN 'SET' ELSE 'MEMBER' END) THEN
    IF modern THEN
      EXECUTE 'GRANT "cqrs_reader" TO CURRENT_USER WITH INHERIT FALSE, SET TRUE';
    ELSE
      EXECUTE 'GRANT "cqrs_reader" TO CURRENT_USER';
    END IF;
  END IF;
EXCEPTION
  WHEN unique_violation THEN NULL; -- another session granted it at the same time
  WHEN insufficient_privilege THEN
    RAISE WARNING '%: % (a superuser or the role''s creator must grant it)', current_user, SQLERRM;
END $$;
DO $$
DECLARE
  modern boolean := current_setting('server_version_num')::int >= 160000;
  grantee name;
BEGIN
  -- The routes' login user: no password (IAM), no attribute but LOGIN.
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cqrs_routes') THEN
    BEGIN
      CREATE ROLE "cqrs_routes" LOGIN NOINHERIT;
    EXCEPTION
      WHEN duplicate_object OR unique_violation THEN NULL; -- made by another session just now
      WHEN insufficient_privilege THEN RAISE WARNING '%: % (a superuser or the role''s administrator must do it)', current_user, SQLERRM;
    END;
  END IF;
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'cqrs_routes') THEN
    RETURN;
  END IF;
  -- The reader role: SET ROLE only.
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'cqrs_reader')
     AND NOT pg_has_role('cqrs_routes', 'cqrs_reader', CASE WHEN modern THEN 'SET' ELSE 'MEMBER' END) THEN
    BEGIN
      IF modern THEN
        EXECUTE 'GRANT "cqrs_reader" TO "cqrs_routes" WITH INHERIT FALSE, SET TRUE';
      ELSE
        EXECUTE 'GRANT "cqrs_reader" TO "cqrs_routes"';
      END IF;
    EXCEPTION
      WHEN unique_violation THEN NULL; -- granted by another session just now
      WHEN insufficient_privilege THEN RAISE WARNING '%: % (a superuser or the role''s administrator must do it)', current_user, SQLERRM;
    END;
  END IF;
  -- IAM sign-in, on RDS: both users, directly.
  IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'rds_iam') THEN
    FOREACH grantee IN ARRAY ARRAY['cqrs_routes', current_user]::name[] LOOP
      IF NOT EXISTS (SELECT FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.roleid JOIN pg_roles u ON u.oid = m.member WHERE r.rolname = 'rds_iam' AND u.rolname = grantee) THEN
        BEGIN
          IF modern THEN
            EXECUTE format('GRANT %I TO %I WITH INHERIT TRUE', 'rds_iam', grantee);
          ELSE
            EXECUTE format('GRANT %I TO %I', 'rds_iam', grantee);
          END IF;
        EXCEPTION
          WHEN unique_violation THEN NULL; -- granted by another session just now
          WHEN insufficient_privilege THEN RAISE WARNING '%: % (a superuser or the role''s administrator must do it)', current_user, SQLERRM;
        END;
      END IF;
    END LOOP;
  END IF;
END $$;

CREATE TABLE IF NOT EXISTS "task" (
  "pk" text NOT NULL,
  "sk" text NOT NULL,
  "id" text NOT NULL,
  "tenant_code" text NOT NULL,
  "item_type" text NOT NULL,
  "code" text NOT NULL DEFAULT '',
  "name" text NOT NULL DEFAULT '',
  "version" bigint NOT NULL,
  "is_deleted" boolean NOT NULL DEFAULT false,
  "seq" bigint,
  "ttl" bigint,
  "source" text NOT NULL DEFAULT '',
  "request_id" text NOT NULL DEFAULT '',
  "created_at" timestamptz,
  "created_by" text NOT NULL DEFAULT '',
  "created_ip" text NOT NULL DEFAULT '',
  "updated_at" timestamptz,
  "updated_by" text NOT NULL DEFAULT '',
  "updated_ip" text NOT NULL DEFAULT '',
  "attributes" jsonb NOT NULL DEFAULT '{}'::jsonb,
  "owner" text NOT NULL CONSTRAINT "task_owner_check" CHECK (octet_length("owner") <= 64),
  "status" text NOT NULL CONSTRAINT "task_status_check" CHECK ("status" IN ('open', 'done')),
  "taskId" text CONSTRAINT "task_taskId_check" CHECK (octet_length("taskId") <= 26),
  "title" text NOT NULL CONSTRAINT "task_title_check" CHECK (octet_length("title") <= 200),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "task_tenant_updated" ON "task" ("tenant_code", "updated_at");
ALTER TABLE "task" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "task" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "task";
CREATE POLICY "tenant_rows" ON "task" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "cqrs_items" (
  "pk" text NOT NULL,
  "sk" text NOT NULL,
  "id" text NOT NULL,
  "tenant_code" text NOT NULL,
  "item_type" text NOT NULL,
  "code" text NOT NULL DEFAULT '',
  "name" text NOT NULL DEFAULT '',
  "version" bigint NOT NULL,
  "is_deleted" boolean NOT NULL DEFAULT false,
  "seq" bigint,
  "ttl" bigint,
  "source" text NOT NULL DEFAULT '',
  "request_id" text NOT NULL DEFAULT '',
  "created_at" timestamptz,
  "created_by" text NOT NULL DEFAULT '',
  "created_ip" text NOT NULL DEFAULT '',
  "updated_at" timestamptz,
  "updated_by" text NOT NULL DEFAULT '',
  "updated_ip" text NOT NULL DEFAULT '',
  "attributes" jsonb NOT NULL DEFAULT '{}'::jsonb,
  "entity" text,
  "reason" text NOT NULL,
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "cqrs_items_tenant_updated" ON "cqrs_items" ("tenant_code", "updated_at");
ALTER TABLE "cqrs_items" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "cqrs_items" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "cqrs_items";
CREATE POLICY "tenant_rows" ON "cqrs_items" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "cqrs_removed" (
  "pk" text NOT NULL,
  "sk" text NOT NULL,
  "version" bigint NOT NULL,
  "removed_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
