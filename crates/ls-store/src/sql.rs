//! The statements both backends run, written once with SQLite's numbered placeholders (`?1`);
//! the Postgres backend rewrites them to `$1` with [`postgres_dialect`]. Where the dialects
//! differ (the migration bookkeeping, the optional run filter), each backend has its own text.

pub const INSERT_RUN: &str = "INSERT INTO runs (run_id, kind, agent, model, agent_type, seed, created_at, case_count, mean_score, summary_json) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10)";
pub const INSERT_EPISODE: &str = "INSERT INTO episodes (run_id, idx, case_id, base_case_id, task_type, final_score, result_class, decision, steps, total_reward, record_json) VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)";
pub const DELETE_EPISODES: &str = "DELETE FROM episodes WHERE run_id = ?1";
pub const DELETE_RUN: &str = "DELETE FROM runs WHERE run_id = ?1";
pub const COUNT_RUN: &str = "SELECT COUNT(*) FROM runs WHERE run_id = ?1";
pub const LIST_RUNS: &str = "SELECT run_id, kind, agent, model, agent_type, seed, created_at, case_count, mean_score, summary_json FROM runs ORDER BY created_at DESC, run_id DESC LIMIT ?1";
pub const GET_RUN: &str = "SELECT run_id, kind, agent, model, agent_type, seed, created_at, case_count, mean_score, summary_json FROM runs WHERE run_id = ?1";
pub const EPISODE_COLUMNS: &str = "run_id, idx, case_id, base_case_id, task_type, final_score, result_class, decision, steps, total_reward, record_json";
pub const UPSERT_LEADERBOARD: &str = "INSERT INTO leaderboard (model, agent_type, temperature, pass_k, updated_at, entry_json) VALUES (?1,?2,?3,?4,?5,?6) ON CONFLICT(model, agent_type, temperature, pass_k) DO UPDATE SET updated_at = excluded.updated_at, entry_json = excluded.entry_json";
pub const LEADERBOARD: &str = "SELECT model, agent_type, temperature, pass_k, updated_at, entry_json FROM leaderboard ORDER BY model, agent_type, temperature, pass_k LIMIT 10000";
pub const SAVE_REPORT: &str = "INSERT INTO reports (report_id, generated_at, report_json) VALUES (?1,?2,?3) ON CONFLICT(report_id) DO UPDATE SET generated_at = excluded.generated_at, report_json = excluded.report_json";
pub const LATEST_REPORT: &str =
    "SELECT report_json FROM reports ORDER BY generated_at DESC, report_id DESC LIMIT 1";
pub const SAVE_MEMORY: &str = "INSERT INTO memory_snapshots (session_id, taken_at, memory_json) VALUES (?1,?2,?3) ON CONFLICT(session_id, taken_at) DO UPDATE SET memory_json = excluded.memory_json";
pub const LATEST_MEMORY: &str =
    "SELECT memory_json FROM memory_snapshots WHERE session_id = ?1 ORDER BY taken_at DESC LIMIT 1";
pub const SCHEMA_VERSION: &str = "SELECT COALESCE(MAX(version), 0) FROM schema_version";
pub const RECORD_MIGRATION: &str =
    "INSERT INTO schema_version (version, description) VALUES (?1, ?2)";

/// `?N` placeholders become `$N` (the statements above hold no `?` inside a string literal).
pub fn postgres_dialect(sql: &str) -> String {
    sql.replace('?', "$")
}

/// A migration's DDL for Postgres: the same statements with SQLite's affinity names mapped to
/// the Postgres types of the same range (`INTEGER` is 64-bit in SQLite, `REAL` is a double).
pub fn postgres_ddl(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    for (i, word) in sql.split(' ').enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let (core, rest) = word.split_at(word.trim_end_matches([',', '\n', ')', ';']).len());
        out.push_str(match core {
            "INTEGER" => "BIGINT",
            "REAL" => "DOUBLE PRECISION",
            other => other,
        });
        out.push_str(rest);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects() {
        assert_eq!(
            postgres_dialect("SELECT x FROM t WHERE a = ?1 AND b = ?2"),
            "SELECT x FROM t WHERE a = $1 AND b = $2"
        );
        assert_eq!(
            postgres_ddl("CREATE TABLE t (a INTEGER NOT NULL, b REAL NOT NULL, c TEXT, d REAL);"),
            "CREATE TABLE t (a BIGINT NOT NULL, b DOUBLE PRECISION NOT NULL, c TEXT, d DOUBLE PRECISION);"
        );
        for (_, _, ddl) in crate::MIGRATIONS {
            let pg = postgres_ddl(ddl);
            assert!(!pg.contains(" REAL ") && !pg.contains(" INTEGER "), "{pg}");
        }
    }
}
