//! Path and query extractors whose refusals are the JSON error shape ([`ApiError`]), where
//! axum's own answer a plain-text 400 (a path parameter that is not UTF-8 once decoded, a query
//! string that does not parse).

use crate::error::{prefix, ApiError};
use axum::extract::{FromRequestParts, Path, Query};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// `axum::extract::Path`, refused as a 400 [`ApiError`].
pub struct ApiPath<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(v)| Self(v))
            .map_err(|e| ApiError::BadRequest(format!("path: {}", prefix(&e.body_text()))))
    }
}

/// `axum::extract::Query`, refused as a 422 [`ApiError`] naming the problem.
pub struct ApiQuery<T>(pub T);

impl<T, S> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(v)| Self(v))
            .map_err(|e| ApiError::Validation(format!("query: {}", prefix(&e.body_text()))))
    }
}
