//! The SQLite and PostgreSQL migrations must build the same schema: the
//! same tables, columns (names, types normalised to a few kinds, NOT NULL),
//! primary keys, indexes (names, columns, order, unique, partial) and
//! triggers (names and events). PostgreSQL's functions are its triggers'
//! and those named in `POSTGRES_FUNCTIONS`, no others.
//!
//! Needs PostgreSQL: it runs in the PostgreSQL pass of tests/run.sh
//! (`DROVER_TEST_DATABASE=postgres`), and fails there when the server
//! cannot be reached. On SQLite alone there is nothing to compare with.

use std::collections::{BTreeMap, BTreeSet};

use sqlx::AnyPool;

use super::tests::{TestDatabase, needs};
use super::{Durability, Store};

/// A column's type, as one of a few kinds.
fn kind(sql_type: &str) -> String {
    let t = sql_type.to_ascii_lowercase();
    match t.as_str() {
        "integer" | "bigint" | "int" | "int4" | "int8" | "smallint" | "bigserial" | "serial" => {
            "int"
        }
        "text" | "character varying" | "varchar" => "text",
        "real" | "double precision" | "float" | "numeric" => "float",
        "blob" | "bytea" => "bytes",
        "boolean" | "bool" => "bool",
        _ => return format!("other: {t}"),
    }
    .to_owned()
}

#[derive(Debug, Default, PartialEq, Eq)]
struct Table {
    /// name → (kind, not null)
    columns: BTreeMap<String, (String, bool)>,
    primary_key: Vec<String>,
    /// (name, or `unique` for a UNIQUE constraint's, columns, unique, partial)
    indexes: BTreeSet<(String, String, bool, bool)>,
    /// (name, event: `insert`, `update` or `delete`)
    triggers: BTreeSet<(String, String)>,
}

/// The functions PostgreSQL has that SQLite needs none of, besides the
/// triggers' own (named after their trigger).
const POSTGRES_FUNCTIONS: &[&str] = &[
    // A lease batch in one call (the store's PostgreSQL lease).
    "drover_lease",
    // Whether capabilities satisfy a job's `requires` (drover_lease's).
    "drover_satisfies",
    // The lease reads in one call: kept while a replica of the version
    // before drover_lease may still be running against the database.
    "drover_lease_reads",
];

type Schema = BTreeMap<String, Table>;

async fn sqlite_schema(pool: &AnyPool) -> Schema {
    let mut schema = Schema::new();
    let columns: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT CAST(m.name AS TEXT), CAST(p.name AS TEXT), CAST(p.type AS TEXT), CAST(p.\"notnull\" AS INTEGER), CAST(p.pk AS INTEGER) FROM sqlite_master m, pragma_table_info(m.name) p
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'
         ORDER BY m.name, p.pk, p.cid",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, column, sql_type, not_null, pk) in columns {
        let t = schema.entry(table).or_default();
        // A PRIMARY KEY column is NOT NULL on PostgreSQL, and in effect here.
        t.columns
            .insert(column.clone(), (kind(&sql_type), not_null != 0 || pk > 0));
        if pk > 0 {
            t.primary_key.push(column);
        }
    }
    let indexes: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT CAST(m.name AS TEXT), CAST(i.name AS TEXT), CAST(i.origin AS TEXT), CAST(i.\"unique\" AS INTEGER), CAST(i.partial AS INTEGER) FROM sqlite_master m, pragma_index_list(m.name) i
         WHERE m.type = 'table' AND m.name <> '_sqlx_migrations' AND i.origin <> 'pk'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, index, origin, unique, partial) in indexes {
        let cols: Vec<(String, i64)> = sqlx::query_as(
            "SELECT CAST(COALESCE(name, '(expression)') AS TEXT), CAST(\"desc\" AS INTEGER) FROM pragma_index_xinfo($1) WHERE key = 1 ORDER BY seqno",
        )
        .bind(&index)
        .fetch_all(pool)
        .await
        .unwrap();
        let cols = cols
            .iter()
            .map(|(c, desc)| {
                if *desc != 0 {
                    format!("{c} desc")
                } else {
                    c.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(",");
        let name = if origin == "u" {
            "unique".into()
        } else {
            index
        };
        schema
            .entry(table)
            .or_default()
            .indexes
            .insert((name, cols, unique != 0, partial != 0));
    }
    let triggers: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT CAST(tbl_name AS TEXT), CAST(name AS TEXT), CAST(sql AS TEXT) FROM sqlite_master WHERE type = 'trigger'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, name, sql) in triggers {
        // CREATE TRIGGER name {BEFORE|AFTER} {INSERT|UPDATE [OF …]|DELETE} ON …
        let sql = sql.to_ascii_lowercase();
        let event = ["insert", "update", "delete"]
            .into_iter()
            .min_by_key(|e| sql.find(&format!(" {e} ")).unwrap_or(usize::MAX))
            .expect("an event");
        let t = schema.entry(table).or_default();
        t.triggers.insert((name, event.to_owned()));
    }
    schema
}

async fn postgres_schema(pool: &AnyPool) -> Schema {
    let mut schema = Schema::new();
    let columns: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT CAST(table_name AS TEXT), CAST(column_name AS TEXT), CAST(data_type AS TEXT), CAST(is_nullable AS TEXT)
         FROM information_schema.columns
         WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'
         ORDER BY table_name, ordinal_position",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, column, sql_type, nullable) in columns {
        schema
            .entry(table)
            .or_default()
            .columns
            .insert(column, (kind(&sql_type), nullable == "NO"));
    }
    let indexes: Vec<(String, String, i64, i64, i64, i64, String)> = sqlx::query_as(
        "SELECT CAST(t.relname AS TEXT), CAST(i.relname AS TEXT),
                CAST(CASE WHEN ix.indisprimary THEN 1 ELSE 0 END AS BIGINT),
                CAST(CASE WHEN ix.indisunique THEN 1 ELSE 0 END AS BIGINT),
                CAST(CASE WHEN ix.indpred IS NOT NULL THEN 1 ELSE 0 END AS BIGINT),
                CAST(CASE WHEN EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = ix.indexrelid) THEN 1 ELSE 0 END AS BIGINT),
                array_to_string(ARRAY(
                    SELECT COALESCE(CAST(a.attname AS TEXT), '(expression)')
                        || CASE WHEN ix.indoption[k] & 1 = 1 THEN ' desc' ELSE '' END
                    FROM generate_subscripts(ix.indkey, 1) AS k
                    LEFT JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = ix.indkey[k]
                    ORDER BY k), ',')
         FROM pg_index ix JOIN pg_class i ON i.oid = ix.indexrelid JOIN pg_class t ON t.oid = ix.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace
         WHERE n.nspname = 'public' AND t.relname <> '_sqlx_migrations'",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, index, primary, unique, partial, constraint, cols) in indexes {
        let t = schema.entry(table).or_default();
        if primary != 0 {
            t.primary_key = cols.split(',').map(str::to_owned).collect();
            continue;
        }
        let name = if constraint != 0 {
            "unique".into()
        } else {
            index
        };
        t.indexes.insert((name, cols, unique != 0, partial != 0));
    }
    // tgtype's bits: 4 insert, 8 delete, 16 update.
    let triggers: Vec<(String, String, i64)> = sqlx::query_as(
        "SELECT CAST(c.relname AS TEXT), CAST(t.tgname AS TEXT), CAST(t.tgtype AS BIGINT)
         FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND NOT t.tgisinternal",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    for (table, name, kind) in triggers {
        let event = match kind {
            k if k & 4 != 0 => "insert",
            k if k & 16 != 0 => "update",
            _ => "delete",
        };
        let t = schema.entry(table).or_default();
        t.triggers.insert((name, event.to_owned()));
    }
    schema
}

/// PostgreSQL's own functions (not an extension's).
async fn postgres_functions(pool: &AnyPool) -> BTreeSet<String> {
    let names: Vec<(String,)> = sqlx::query_as(
        "SELECT CAST(p.proname AS TEXT) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname = 'public'
           AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.objid = p.oid AND d.deptype = 'e')",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    names.into_iter().map(|(n,)| n).collect()
}

/// Lines naming every difference, for a readable failure.
fn differences(sqlite: &Schema, postgres: &Schema) -> Vec<String> {
    let mut out = Vec::new();
    let tables: BTreeSet<&String> = sqlite.keys().chain(postgres.keys()).collect();
    for name in tables {
        match (sqlite.get(name), postgres.get(name)) {
            (Some(s), Some(p)) if s == p => {}
            (Some(s), Some(p)) => {
                let cols: BTreeSet<&String> = s.columns.keys().chain(p.columns.keys()).collect();
                for c in cols {
                    let (a, b) = (s.columns.get(c), p.columns.get(c));
                    if a != b {
                        out.push(format!("{name}.{c}: SQLite {a:?}, PostgreSQL {b:?}"));
                    }
                }
                if s.primary_key != p.primary_key {
                    out.push(format!(
                        "{name} primary key: SQLite {:?}, PostgreSQL {:?}",
                        s.primary_key, p.primary_key
                    ));
                }
                for t in s.triggers.symmetric_difference(&p.triggers) {
                    let only = if s.triggers.contains(t) {
                        "SQLite"
                    } else {
                        "PostgreSQL"
                    };
                    out.push(format!("{name}: trigger {t:?} only on {only}"));
                }
                for i in s.indexes.symmetric_difference(&p.indexes) {
                    let only = if s.indexes.contains(i) {
                        "SQLite"
                    } else {
                        "PostgreSQL"
                    };
                    out.push(format!("{name}: index {i:?} only on {only}"));
                }
            }
            (s, _) => out.push(format!(
                "table {name} only on {}",
                if s.is_some() { "SQLite" } else { "PostgreSQL" }
            )),
        }
    }
    out
}

#[tokio::test]
async fn sqlite_and_postgres_migrations_build_the_same_schema_on_postgres() {
    // The PostgreSQL pass has both databases.
    needs(true);
    let sqlite_db = {
        // A SQLite database beside the PostgreSQL one, migrated the same way.
        let dir = std::env::temp_dir().join(format!("drover-schema-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}", dir.join("db.sqlite").display());
        (TestDatabase::Sqlite(dir), url)
    };
    let postgres_db = TestDatabase::create("schema");
    let sqlite = Store::open(&sqlite_db.1, Durability::Normal).await.unwrap();
    let postgres = Store::open(&postgres_db.1, Durability::Normal)
        .await
        .unwrap();
    let (s, p) = (
        sqlite_schema(&sqlite.reader).await,
        postgres_schema(&postgres.reader).await,
    );
    assert!(
        s.len() >= 8 && s["jobs"].columns.len() >= 20,
        "read the schema: {s:#?}"
    );
    assert!(
        p["usage"].triggers.len() == 1 && p["jobs"].triggers.len() == 1,
        "read the triggers: {p:#?}"
    );
    let mut diff = differences(&s, &p);
    let expected: BTreeSet<String> = p
        .values()
        .flat_map(|t| t.triggers.iter().map(|(name, _)| name.clone()))
        .chain(POSTGRES_FUNCTIONS.iter().map(|f| (*f).to_owned()))
        .collect();
    let functions = postgres_functions(&postgres.reader).await;
    for f in functions.symmetric_difference(&expected) {
        diff.push(if functions.contains(f) {
            format!("function {f} on PostgreSQL is neither a trigger's nor in POSTGRES_FUNCTIONS")
        } else {
            format!("function {f} is expected on PostgreSQL and missing")
        });
    }
    assert!(
        diff.is_empty(),
        "the migrations differ:\n{}",
        diff.join("\n")
    );
    sqlite.close().await;
    postgres.close().await;
}
