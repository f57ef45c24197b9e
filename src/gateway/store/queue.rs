//! The durable update queue and the stored `allowed_updates` list. Polling and the webhook
//! share this one ordered queue. An update is an opaque payload under its kind: what the kinds are, which ones the filter admits, and how a
//! payload becomes an Update object is `gateway::updates`, not this module's concern.
//!
//! Every query here uses the `update_id` primary key or `LIMIT`, so the cost of serving and
//! acknowledging does not grow with the queue length; the number of pending updates is a
//! counter that triggers keep in the same transaction as every insert and delete (schema.rs),
//! so `getWebhookInfo` and `/healthz` never count rows. The tests below check both with
//! 100,000 queued updates.

use rusqlite::{params, Connection};
use serde_json::Value;

use super::{schema, Result};

const ALLOWED_UPDATES_KEY: &str = "allowed_updates";

/// The page query of `fetch` (getUpdates and the webhook head): a seek on the primary key.
const FETCH_SQL: &str = "SELECT update_id, kind, payload FROM updates WHERE update_id >= ?1 ORDER BY update_id LIMIT ?2";
/// Acknowledgement: a range delete on the primary key.
const ACK_BELOW_SQL: &str = "DELETE FROM updates WHERE update_id < ?1";
/// Whether an acknowledgement has work to do.
const HAS_BELOW_SQL: &str = "SELECT 1 FROM updates WHERE update_id < ?1 LIMIT 1";
/// The id of the `n`-th update from the end (`?1` = n - 1): a seek on the primary key, backwards.
const NTH_FROM_END_SQL: &str = "SELECT update_id FROM updates ORDER BY update_id DESC LIMIT 1 OFFSET ?1";
/// The pending count, kept by triggers so that it never counts rows.
const DEPTH_SQL: &str = "SELECT pending FROM queue_stats WHERE id = 1";

/// Appends an update; returns its `update_id`.
pub fn enqueue(conn: &Connection, kind: &str, payload: &Value) -> Result<i64> {
    conn.prepare_cached("INSERT INTO updates (kind, payload) VALUES (?1, ?2)")?.execute(params![kind, payload.to_string()])?;
    Ok(conn.last_insert_rowid())
}

/// One queued update as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Queued {
    pub update_id: i64,
    pub kind: String,
    pub payload: Value,
}

/// Up to `limit` updates with `update_id >= offset`, in queue order. Everything queued is
/// served: the filter decides what is queued when an update is created, and a later change of
/// it does not strand or drop updates already waiting (as in the Bot API, and SPEC "Delivery
/// semantics": repeated until acknowledged).
pub fn fetch(conn: &Connection, offset: Option<i64>, limit: u32) -> Result<Vec<Queued>> {
    let mut stmt = conn.prepare_cached(FETCH_SQL)?;
    let rows: Vec<(i64, String, String)> = stmt
        .query_map(params![offset.unwrap_or(0), limit], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<rusqlite::Result<_>>()?;
    rows.into_iter()
        .map(|(update_id, kind, payload)| {
            let payload: Value = serde_json::from_str(&payload).map_err(|e| {
                super::StoreError::Corrupt(format!("stored update {update_id} is not valid JSON: {e}"))
            })?;
            Ok(Queued { update_id, kind, payload })
        })
        .collect()
}

/// True if any update below `offset` is still queued (so an acknowledgement has work to do).
pub fn has_below(conn: &Connection, offset: i64) -> Result<bool> {
    let mut stmt = conn.prepare_cached(HAS_BELOW_SQL)?;
    Ok(stmt.exists(params![offset])?)
}

/// Acknowledges (deletes) every update below `offset`.
pub fn ack_below(conn: &Connection, offset: i64) -> Result<usize> {
    Ok(conn.prepare_cached(ACK_BELOW_SQL)?.execute(params![offset])?)
}

/// getUpdates with a negative offset `-n` (the Bot API's "updates starting from the n-th from
/// the end; all previous updates will be forgotten"): acknowledges every update but the last
/// `n`, in the caller's transaction. Returns how many were dropped and the id of the first
/// update kept (`None` when fewer than `n` were queued: nothing is dropped, all is served).
pub fn keep_last(conn: &Connection, n: u32) -> Result<(usize, Option<i64>)> {
    let nth: Option<i64> = {
        use rusqlite::OptionalExtension;
        conn.prepare_cached(NTH_FROM_END_SQL)?.query_row(params![n.saturating_sub(1)], |r| r.get(0)).optional()?
    };
    match nth {
        Some(first_kept) => Ok((ack_below(conn, first_kept)?, Some(first_kept))),
        None => Ok((0, None)),
    }
}

/// The first pending update (the webhook's head).
pub fn head(conn: &Connection) -> Result<Option<Queued>> {
    Ok(fetch(conn, None, 1)?.into_iter().next())
}

/// Acknowledges the update `update_id` and every update before it (as a getUpdates `offset`
/// past it would).
pub fn ack_through(conn: &Connection, update_id: i64) -> Result<usize> {
    ack_below(conn, update_id + 1)
}

/// Number of pending updates (the maintained counter; O(1)).
pub fn depth(conn: &Connection) -> Result<i64> {
    let mut stmt = conn.prepare_cached(DEPTH_SQL)?;
    Ok(stmt.query_row([], |r| r.get(0))?)
}

/// Drops every pending update (deleteWebhook with drop_pending_updates).
pub fn clear(conn: &Connection) -> Result<usize> {
    Ok(conn.prepare_cached("DELETE FROM updates")?.execute([])?)
}

/// The stored explicit filter, if one was ever given. Only this module writes it; a value that
/// does not read back is refused rather than silently widened to the default set.
pub fn stored_allowed_updates(conn: &Connection) -> Result<Option<Vec<String>>> {
    match schema::meta_get(conn, ALLOWED_UPDATES_KEY)? {
        None => Ok(None),
        Some(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| super::StoreError::Corrupt(format!("the stored allowed_updates is unreadable: {e}"))),
    }
}

pub fn store_allowed_updates(conn: &Connection, kinds: &[String]) -> Result<()> {
    schema::meta_set(conn, ALLOWED_UPDATES_KEY, &Value::from(kinds.to_vec()).to_string())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Connection {
        let c = Connection::open_in_memory().expect("memory db");
        schema::migrate(&c).expect("migrate");
        c
    }

    #[test]
    fn fetch_orders_pages_and_acks() {
        let c = db();
        for i in 0..5 {
            enqueue(&c, "message", &serde_json::json!({ "n": i })).expect("enqueue");
        }
        let got = fetch(&c, None, 100).expect("fetch");
        assert_eq!(got.len(), 5);
        assert_eq!((got[0].update_id, got[0].kind.as_str()), (1, "message"));
        assert_eq!(got[3].payload["n"], 3);
        let got = fetch(&c, Some(3), 1).expect("fetch");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].update_id, 3);
        ack_below(&c, 4).expect("ack");
        assert_eq!(depth(&c).expect("depth"), 2);
        assert!(!has_below(&c, 4).expect("has_below"));
    }

    #[test]
    fn the_stored_filter_reads_back_or_is_an_error() {
        let c = db();
        assert_eq!(stored_allowed_updates(&c).expect("none yet"), None);
        store_allowed_updates(&c, &["callback_query".to_string()]).expect("store");
        assert_eq!(stored_allowed_updates(&c).expect("read"), Some(vec!["callback_query".to_string()]));
        schema::meta_set(&c, ALLOWED_UPDATES_KEY, "not json").expect("corrupt");
        assert!(stored_allowed_updates(&c).is_err(), "an unreadable filter is an error, not the default set");
    }

    #[test]
    fn pending_counter_follows_every_insert_and_delete() {
        let c = db();
        assert_eq!(depth(&c).expect("depth"), 0);
        for i in 0..10 {
            enqueue(&c, "message", &serde_json::json!({ "n": i })).expect("enqueue");
        }
        assert_eq!(depth(&c).expect("depth"), 10);
        assert_eq!(ack_through(&c, 3).expect("ack"), 3);
        assert_eq!(depth(&c).expect("depth"), 7);
        let u = head(&c).expect("head").expect("some");
        assert_eq!((u.update_id, u.payload["n"].as_i64()), (4, Some(3)));
        clear(&c).expect("clear");
        assert_eq!(depth(&c).expect("depth"), 0);
        let n: i64 = c.query_row("SELECT count(*) FROM updates", [], |r| r.get(0)).expect("count");
        assert_eq!(n, 0);
        // A database created before the counter existed gets it initialised from its rows.
        let old = Connection::open_in_memory().expect("memory db");
        old.execute_batch(
            "CREATE TABLE updates (update_id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, payload TEXT NOT NULL);
             INSERT INTO updates (kind, payload) VALUES ('message', '{}'), ('message', '{}');",
        )
        .expect("old schema");
        schema::migrate(&old).expect("migrate");
        assert_eq!(depth(&old).expect("depth"), 2);
        enqueue(&old, "message", &serde_json::json!({})).expect("enqueue");
        assert_eq!(depth(&old).expect("depth"), 3);
        // Later opens keep the counter (no recount, no reset).
        old.execute_batch("UPDATE queue_stats SET pending = 42").expect("mark");
        schema::migrate(&old).expect("migrate again");
        assert_eq!(depth(&old).expect("depth"), 42);
    }

    fn plan(c: &Connection, sql: &str) -> String {
        let mut stmt = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).expect("explain");
        // Plain numbers for the parameters: the plan of a seek does not depend on their values.
        for i in 1..=stmt.parameter_count() {
            stmt.raw_bind_parameter(i, 1).expect("bind");
        }
        let rows: Vec<String> = stmt
            .raw_query()
            .mapped(|r| r.get::<_, String>(3))
            .collect::<rusqlite::Result<_>>()
            .expect("rows");
        rows.join("; ")
    }

    #[test]
    fn keep_last_forgets_all_but_the_last_n() {
        let c = db();
        assert_eq!(keep_last(&c, 3).expect("empty"), (0, None));
        let ids: Vec<i64> = (0..10).map(|_| enqueue(&c, "message", &serde_json::json!({})).expect("enqueue")).collect();
        assert_eq!(keep_last(&c, 20).expect("fewer than n"), (0, None));
        assert_eq!(keep_last(&c, 3).expect("keep 3"), (7, Some(ids[7])));
        assert_eq!(depth(&c).expect("depth"), 3, "the counter follows");
        assert_eq!(fetch(&c, None, 100).expect("fetch").iter().map(|u| u.update_id).collect::<Vec<_>>(), ids[7..].to_vec());
        assert_eq!(keep_last(&c, 1).expect("keep 1"), (2, Some(ids[9])));
    }

    /// The queries of getUpdates and of the webhook seek by the primary key; none scans, and the
    /// count does not touch the queue at all.
    #[test]
    fn queue_queries_use_the_primary_key() {
        let c = db();
        for sql in [FETCH_SQL, ACK_BELOW_SQL, HAS_BELOW_SQL] {
            let p = plan(&c, sql);
            assert!(p.contains("USING INTEGER PRIMARY KEY"), "{sql}: {p}");
            assert!(!p.contains("SCAN"), "{sql}: {p}");
        }
        let p = plan(&c, DEPTH_SQL);
        assert!(!p.contains("updates"), "{p}");
    }

    /// Serving a page, acknowledging it and counting the queue cost the same with 100,000
    /// pending updates as with 10. Cost is counted, not timed: SQLite's virtual-machine steps
    /// for the very statements `fetch`, `ack_below` and `depth` run, and full-scan steps (none).
    #[test]
    fn cost_does_not_grow_with_100k_pending_updates() {
        use rusqlite::StatementStatus::{FullscanStep, VmStep};

        let payload = serde_json::json!({ "message_id": 1, "text": "x".repeat(300) });
        let steps = |n: i64| -> [i32; 3] {
            let c = db();
            c.execute_batch("BEGIN").expect("begin");
            for _ in 0..n {
                enqueue(&c, "message", &payload).expect("enqueue");
            }
            c.execute_batch("COMMIT").expect("commit");
            assert_eq!(depth(&c).expect("depth"), n);
            let page = fetch(&c, Some(1), 5).expect("fetch");
            assert_eq!(page.iter().map(|u| u.update_id).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5]);

            let mut cost = [0; 3];
            for (i, sql) in [FETCH_SQL, ACK_BELOW_SQL, DEPTH_SQL].into_iter().enumerate() {
                let mut stmt = c.prepare(sql).expect("prepare");
                match i {
                    0 => assert_eq!(stmt.query_map(params![1, 5], |_| Ok(())).expect("page").count(), 5),
                    1 => assert_eq!(stmt.execute(params![6]).expect("ack"), 5),
                    _ => assert_eq!(stmt.query_row([], |r| r.get::<_, i64>(0)).expect("depth"), n - 5),
                }
                assert_eq!(stmt.get_status(FullscanStep), 0, "{sql} scanned with {n} pending");
                cost[i] = stmt.get_status(VmStep);
            }
            cost
        };
        let (small, big) = (steps(10), steps(100_000));
        assert_eq!(small, big, "VM steps of page, ack and count with 10 vs 100,000 pending updates");
    }
}
