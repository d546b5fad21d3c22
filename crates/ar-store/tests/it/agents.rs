//! Conformance cases for agents: upsert, read, listing order and app scoping.

use std::sync::Arc;

use ar_core::store::Store;
use ar_core::ApprovalMode;

use crate::fixtures::agent;

pub async fn agents_put_get_list(store: Arc<dyn Store>) {
    let first = agent("app-a", "agent-1", 10);
    let second = agent("app-a", "agent-0", 20);
    assert!(store.put_agent(&first).await.unwrap(), "first put creates");
    assert!(store.put_agent(&second).await.unwrap());
    assert_eq!(
        store.get_agent("app-a", "agent-1").await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.get_agent("app-a", "missing").await.unwrap(), None);

    let mut changed = first.clone();
    changed.name = "Renamed".to_string();
    changed.approval_mode = ApprovalMode::Always;
    changed.execution_config = None;
    changed.skills.clear();
    changed.updated_at = crate::fixtures::micros(crate::fixtures::at(99));
    assert!(
        !store.put_agent(&changed).await.unwrap(),
        "second put replaces"
    );
    assert_eq!(
        store.get_agent("app-a", "agent-1").await.unwrap(),
        Some(changed.clone())
    );

    // Oldest first, regardless of id order.
    let listed = store.list_agents("app-a").await.unwrap();
    assert_eq!(listed, vec![changed, second]);
}

pub async fn agents_are_scoped_by_app(store: Arc<dyn Store>) {
    let mine = agent("app-a", "shared-id", 1);
    let mut theirs = agent("app-b", "shared-id", 2);
    theirs.name = "Theirs".to_string();
    assert!(store.put_agent(&mine).await.unwrap());
    assert!(
        store.put_agent(&theirs).await.unwrap(),
        "same id in another app is a new agent"
    );
    assert_eq!(
        store.get_agent("app-a", "shared-id").await.unwrap(),
        Some(mine.clone())
    );
    assert_eq!(
        store.get_agent("app-b", "shared-id").await.unwrap(),
        Some(theirs.clone())
    );
    assert_eq!(store.list_agents("app-a").await.unwrap(), vec![mine]);
    assert_eq!(store.list_agents("app-b").await.unwrap(), vec![theirs]);
    assert!(store.list_agents("app-c").await.unwrap().is_empty());
}
