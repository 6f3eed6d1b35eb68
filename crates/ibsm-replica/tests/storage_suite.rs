//! openraft's own storage test suite against the redb log store and state machine.

use ibsm_replica::store::{open_db, LogStore, StateMachineStore};
use ibsm_replica::TypeConfig;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{AnyError, StorageError, StorageIOError};

struct RedbBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, tempfile::TempDir> for RedbBuilder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore), StorageError<u64>> {
        let dir = tempfile::tempdir()
            .map_err(|e| StorageError::from(StorageIOError::write(AnyError::new(&e))))?;
        let db = open_db(&dir.path().join("replica.redb"))
            .map_err(|e| StorageError::from(StorageIOError::write(AnyError::new(&e))))?;
        let sm = StateMachineStore::open(db.clone())
            .map_err(|e| StorageError::from(StorageIOError::read(AnyError::new(&e))))?;
        Ok((dir, LogStore::new(db), sm))
    }
}

#[test]
fn openraft_storage_suite_passes() -> Result<(), Box<StorageError<u64>>> {
    Suite::test_all(RedbBuilder).map_err(Box::new)
}
