-- The relational read model of the service's model.toml (cqrs model sql).
DO $$ BEGIN
  CREATE ROLE "cqrs_reader" NOLOGIN;
EXCEPTION WHEN duplicate_object THEN NULL;
END $$;

CREATE TABLE IF NOT EXISTS "log" (
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
  "at" timestamptz NOT NULL,
  "eventId" text CHECK (octet_length("eventId") <= 26),
  "kind" text CHECK (octet_length("kind") <= 64),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "log_tenant_updated" ON "log" ("tenant_code", "updated_at");
ALTER TABLE "log" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "log" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "log";
CREATE POLICY "tenant_rows" ON "log" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "master_copy" (
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
  "category" text NOT NULL CHECK (octet_length("category") <= 64),
  "attr_code" text NOT NULL CHECK (octet_length("attr_code") <= 64),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "master_copy_tenant_updated" ON "master_copy" ("tenant_code", "updated_at");
ALTER TABLE "master_copy" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "master_copy" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "master_copy";
CREATE POLICY "tenant_rows" ON "master_copy" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "master_data" (
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
  "category" text NOT NULL CHECK (octet_length("category") <= 64),
  "attr_code" text NOT NULL CHECK (octet_length("attr_code") <= 64),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "master_data_tenant_updated" ON "master_data" ("tenant_code", "updated_at");
ALTER TABLE "master_data" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "master_data" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "master_data";
CREATE POLICY "tenant_rows" ON "master_data" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "order" (
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
  "orderId" text CHECK (octet_length("orderId") <= 26),
  "status" text NOT NULL CHECK ("status" IN ('PENDING', 'PAID', 'SHIPPED', 'DELIVERED', 'CANCELLED')),
  "totalCents" numeric,
  "userId" text NOT NULL CHECK (octet_length("userId") <= 128),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "order_tenant_updated" ON "order" ("tenant_code", "updated_at");
ALTER TABLE "order" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "order" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "order";
CREATE POLICY "tenant_rows" ON "order" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "order_item" (
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
  "itemId" text NOT NULL CHECK (octet_length("itemId") <= 16),
  "orderId" text NOT NULL CHECK (octet_length("orderId") <= 26),
  "productId" text NOT NULL CHECK (octet_length("productId") <= 26),
  "quantity" numeric NOT NULL,
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "order_item_tenant_updated" ON "order_item" ("tenant_code", "updated_at");
ALTER TABLE "order_item" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "order_item" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "order_item";
CREATE POLICY "tenant_rows" ON "order_item" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "product" (
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
  "category" text CHECK (octet_length("category") <= 64),
  "labels" jsonb,
  "priceCents" numeric CHECK ("priceCents" >= 0 AND "priceCents" < 1e12 AND "priceCents" = trunc("priceCents")),
  "productId" text CHECK (octet_length("productId") <= 26),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "product_tenant_updated" ON "product" ("tenant_code", "updated_at");
ALTER TABLE "product" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "product" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "product";
CREATE POLICY "tenant_rows" ON "product" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "reading" (
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
  "readAt" timestamptz NOT NULL,
  "sensorId" text NOT NULL CHECK (octet_length("sensorId") <= 64),
  "value" numeric NOT NULL,
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "reading_tenant_updated" ON "reading" ("tenant_code", "updated_at");
ALTER TABLE "reading" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "reading" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "reading";
CREATE POLICY "tenant_rows" ON "reading" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "sequence_format" (
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
  "format" text CHECK (octet_length("format") <= 256),
  "registerDate" text CHECK (octet_length("registerDate") <= 32),
  "rotateBy" text CHECK ("rotateBy" IN ('none', 'yearly', 'fiscal_yearly', 'monthly', 'daily')),
  "startMonth" numeric,
  "typeCode" text NOT NULL CHECK (octet_length("typeCode") <= 64),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "sequence_format_tenant_updated" ON "sequence_format" ("tenant_code", "updated_at");
ALTER TABLE "sequence_format" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "sequence_format" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "sequence_format";
CREATE POLICY "tenant_rows" ON "sequence_format" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "setting" (
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
  "category" text NOT NULL CHECK (octet_length("category") <= 64),
  "attr_code" text NOT NULL CHECK (octet_length("attr_code") <= 64),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "setting_tenant_updated" ON "setting" ("tenant_code", "updated_at");
ALTER TABLE "setting" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "setting" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "setting";
CREATE POLICY "tenant_rows" ON "setting" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "store" (
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
  "city" text NOT NULL CHECK (octet_length("city") <= 64),
  "country" text NOT NULL CHECK (octet_length("country") <= 2),
  "region" text NOT NULL CHECK (octet_length("region") <= 8),
  "storeId" text CHECK (octet_length("storeId") <= 26),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "store_tenant_updated" ON "store" ("tenant_code", "updated_at");
ALTER TABLE "store" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "store" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "store";
CREATE POLICY "tenant_rows" ON "store" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "ttl_policy" (
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
  "days" numeric NOT NULL,
  "table" text NOT NULL CHECK (octet_length("table") <= 64),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "ttl_policy_tenant_updated" ON "ttl_policy" ("tenant_code", "updated_at");
ALTER TABLE "ttl_policy" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "ttl_policy" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "ttl_policy";
CREATE POLICY "tenant_rows" ON "ttl_policy" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "user_auth" (
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
  "provider" text NOT NULL CHECK ("provider" IN ('local', 'sso', 'oauth', 'temp', 'profile')),
  "userId" text NOT NULL CHECK (octet_length("userId") <= 128),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "user_auth_tenant_updated" ON "user_auth" ("tenant_code", "updated_at");
ALTER TABLE "user_auth" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "user_auth" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "user_auth";
CREATE POLICY "tenant_rows" ON "user_auth" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

CREATE TABLE IF NOT EXISTS "user_tenant" (
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
  "tenantCode" text NOT NULL CHECK (octet_length("tenantCode") <= 64),
  "userId" text NOT NULL CHECK (octet_length("userId") <= 128),
  "synced_at" timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY ("pk", "sk")
);
CREATE INDEX IF NOT EXISTS "user_tenant_tenant_updated" ON "user_tenant" ("tenant_code", "updated_at");
ALTER TABLE "user_tenant" ENABLE ROW LEVEL SECURITY;
GRANT SELECT ON "user_tenant" TO "cqrs_reader";
DROP POLICY IF EXISTS "tenant_rows" ON "user_tenant";
CREATE POLICY "tenant_rows" ON "user_tenant" FOR SELECT TO "cqrs_reader" USING ("tenant_code" = current_setting('cqrs.tenant', true));

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
