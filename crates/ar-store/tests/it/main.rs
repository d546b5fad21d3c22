//! Store conformance suite: every case runs against SQLite (file and memory) and PostgreSQL,
//! plus a few backend-specific checks (connection strings, corrupt values, schema isolation).

mod agents;
mod commit;
mod fixtures;
mod harness;
mod leases;
mod migrations;
mod perf;
mod pg_link;
mod records;
mod runs;
mod sanitize;
mod specific;

conformance! {
    agents::agents_put_get_list,
    agents::agents_are_scoped_by_app,
    runs::run_create_round_trip,
    runs::run_minimal_fields_round_trip,
    runs::run_host_run_id_is_idempotent,
    runs::run_create_races_on_host_run_id,
    runs::run_app_scoping,
    runs::run_list_newest_first,
    runs::run_search_and_pagination,
    runs::runs_counted_by_status,
    runs::stale_durable_runs_listed,
    commit::commit_version_guard,
    commit::commit_without_run_keeps_version,
    commit::commit_removes_messages,
    commit::commit_assigns_sequences,
    commit::commit_sequences_contiguous_under_concurrency,
    commit::events_after_with_limit,
    commit::events_position_feed,
    commit::commit_abandoned_midway_leaves_store_usable,
    records::interactions_upsert_by_id,
    records::tool_calls_upsert_by_id,
    records::checkpoints_latest_and_at,
    records::secrets_put_and_delete,
    records::app_secrets_put_replace_and_scope,
    leases::leases_acquire_expire_renew_release,
    leases::leases_orphans_and_owned_runs,
    leases::leases_written_with_a_change,
    leases::cursors_compare_and_swap,
    sanitize::nul_characters_are_stripped,
    sanitize::json_and_text_round_trip_exactly,
}
