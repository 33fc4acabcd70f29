//! Issue 37.5 and 37.9: errors that compose. A refusal that comes up three
//! of an app's own error enums deep (crypto → database → server, written
//! as `thiserror` writes them: `Display` and a `source()` per variant) is
//! found by one call, `WorkError<()>` is a `std::error::Error` and can be
//! such a source, and the reentrant refusal's text suggests no retry.

use std::error::Error;
use std::fmt;

use admission_core::{Admission, Code, Pool, Refusal, WorkError};

/// The crypto layer: a derivation offloaded to a pool whose work returns
/// `Result<_, ()>`.
#[derive(Debug)]
enum CryptoError {
    Derive(WorkError<()>),
}

/// The database layer, over the crypto layer.
#[derive(Debug)]
enum DbError {
    Crypto(CryptoError),
    #[allow(dead_code, reason = "a variant with no refusal, as apps have")]
    Locked,
}

/// The server, over the database.
#[derive(Debug)]
enum ServerError {
    Db(DbError),
}

impl fmt::Display for CryptoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("key derivation failed")
    }
}
impl Error for CryptoError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            CryptoError::Derive(err) => Some(err),
        }
    }
}
impl fmt::Display for DbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("database error")
    }
}
impl Error for DbError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            DbError::Crypto(err) => Some(err),
            DbError::Locked => None,
        }
    }
}
impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("server error")
    }
}
impl Error for ServerError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            ServerError::Db(err) => Some(err),
        }
    }
}

fn derive(pool: &Pool) -> Result<(), CryptoError> {
    // A fail-fast admission's refusal, as `pool.run(..).await` gives it.
    let refused: WorkError<()> = pool.try_admit().map(drop).unwrap_err().into();
    Err(CryptoError::Derive(refused))
}

fn login(pool: &Pool) -> Result<(), ServerError> {
    derive(pool)
        .map_err(DbError::Crypto)
        .map_err(ServerError::Db)
}

#[test]
fn a_refusal_three_enums_deep_is_found() {
    let pool = Pool::new("argon2", 1).unwrap();
    let _held = pool.try_admit().unwrap();
    let err = login(&pool).unwrap_err();

    let refusal = Refusal::find(&err).expect("the refusal under three enums");
    assert_eq!(refusal.pool(), "argon2");
    assert_eq!(refusal.code(), Code::Saturated);

    let unrefused = ServerError::Db(DbError::Locked);
    assert!(Refusal::find(&unrefused).is_none());
    let failed: WorkError<()> = WorkError::Failed(());
    assert!(Refusal::find(&failed).is_none(), "a failure is no refusal");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_reentrant_refusal_suggests_no_retry() {
    let pool = Pool::new("reentrant-text", 1).unwrap();
    let task_pool = pool.clone();
    let refusal = tokio::spawn(async move {
        let _slot = task_pool.try_admit().unwrap();
        let ran = task_pool.run(|| Ok::<_, fmt::Error>(()), Admission::Wait);
        ran.await.unwrap_err().refusal().cloned().unwrap()
    })
    .await
    .unwrap();
    assert_eq!(refusal.code(), Code::Reentrant);
    let text = refusal.to_string();
    assert!(!text.contains("retry"), "{text}");
    assert!(text.contains("ADMISSION_REENTRANT"), "{text}");

    let _held = pool.try_admit().unwrap();
    let saturated = pool.try_admit().unwrap_err().to_string();
    assert!(saturated.ends_with("; retry in 1 s"), "{saturated}");
}
