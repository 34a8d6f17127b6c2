use super::*;
use axum::body::Body;
use axum::http::Request;
use http_body_util::BodyExt;
use tower::ServiceExt;

async fn get(path: &str, etag: Option<&str>) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut req = Request::get(path);
    if let Some(t) = etag {
        req = req.header(header::IF_NONE_MATCH, t);
    }
    let resp = router::<()>()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap();
    let (parts, body) = resp.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes().to_vec(),
    )
}

#[tokio::test]
async fn every_asset_is_served_with_its_type_and_validator() {
    for a in ASSETS {
        let (status, h, body) = get(&format!("/ui/{}", a.path), None).await;
        assert_eq!(status, StatusCode::OK, "{}", a.path);
        assert_eq!(h[header::CONTENT_TYPE], a.content_type, "{}", a.path);
        assert_eq!(h[header::CACHE_CONTROL], "no-cache");
        assert_eq!(h[header::ETAG], a.etag);
        assert_eq!(body, a.body);
        // Revalidation with the tag: 304 and no body.
        let (status, _, body) = get(&format!("/ui/{}", a.path), Some(a.etag)).await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{}", a.path);
        assert!(body.is_empty());
    }
}

#[tokio::test]
async fn the_page_has_a_strict_policy_and_no_inline_code() {
    let (_, h, body) = get("/ui/", None).await;
    assert_eq!(h[header::CONTENT_SECURITY_POLICY], CONTENT_SECURITY_POLICY);
    let html = String::from_utf8(body).unwrap();
    assert!(!html.contains("<style"), "inline style element");
    assert!(!html.contains("style="), "inline style attribute");
    for chunk in html.split("<script").skip(1) {
        let open = chunk.split('>').next().unwrap();
        assert!(open.contains("src="), "inline script: <script{open}>");
    }
    assert!(
        !html.contains("http://") && !html.contains("https://"),
        "external reference in the page"
    );
}

#[tokio::test]
async fn assets_reference_nothing_outside_the_origin() {
    for a in ASSETS {
        let text = std::str::from_utf8(a.body).unwrap();
        // The SVG namespace URI is an identifier, not a request.
        let stripped = text.replace("http://www.w3.org/2000/svg", "");
        assert!(
            !stripped.contains("https://") && !stripped.contains("http://"),
            "{} names an external URL",
            a.path
        );
        assert!(
            !stripped.contains("@import") && !stripped.contains("fonts."),
            "{} loads external styles or fonts",
            a.path
        );
    }
}

#[tokio::test]
async fn every_module_the_page_imports_is_embedded() {
    for a in ASSETS.iter().filter(|a| a.path.ends_with(".js")) {
        let text = std::str::from_utf8(a.body).unwrap();
        for line in text.lines().filter(|l| l.starts_with("import ")) {
            let spec = line.rsplit(['"', '\'']).nth(1).unwrap();
            let target = format!("js/{}", spec.trim_start_matches("./"));
            assert!(
                find(&target).is_some(),
                "{} imports {spec}, not embedded",
                a.path
            );
        }
    }
}

#[tokio::test]
async fn catalog_lists_the_vocabulary() {
    let (status, h, body) = get("/ui/catalog.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(h[header::CONTENT_TYPE], "application/json");
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        v["reason_codes"]["discrepancy"].as_array().unwrap().len(),
        12
    );
    assert_eq!(v["reason_codes"]["fraud"].as_array().unwrap().len(), 15);
    assert_eq!(
        v["actions"].as_array().unwrap().len(),
        ls_core::ActionName::ALL.len()
    );
    assert!(v["curated_cases"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["case_id"] == "CASE-D-001"));
    assert_eq!(v["decisions"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn unknown_assets_are_a_json_404_and_ui_redirects() {
    let (status, h, body) = get("/ui/nope.js", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(h[header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    assert!(String::from_utf8(body).unwrap().contains("/ui/nope.js"));
    let (status, h, _) = get("/ui", None).await;
    assert_eq!(status, StatusCode::PERMANENT_REDIRECT);
    assert_eq!(h[header::LOCATION], "/ui/");
}

#[test]
fn etags_follow_the_content() {
    assert_ne!(fnv1a(b"a"), fnv1a(b"b"));
    assert_eq!(&hex_etag(0x0123_4567_89ab_cdef), b"\"0123456789abcdef\"");
}

#[test]
fn catalog_serves_every_family_contract_the_authority_ranks_and_the_tracks() {
    let cat: serde_json::Value = serde_json::from_slice(catalog()).unwrap();
    for t in ls_core::TaskType::ALL {
        let served = &cat["output_contracts"][t.as_str()];
        let expected = serde_json::to_value(ls_core::contract::output_contract(t)).unwrap();
        assert_eq!(served, &expected, "{t:?}");
        assert!(served["fields"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["name"] == "evidence_map"));
    }
    assert_eq!(
        cat["authority_levels"],
        serde_json::json!([
            "full_authority",
            "restricted_authority",
            "review_only",
            "locked"
        ])
    );
    let tracks = cat["tracks"].as_array().unwrap();
    assert_eq!(tracks.len(), ls_core::BenchmarkTrack::ALL.len() - 1);
    for t in tracks {
        let name = t["track"].as_str().unwrap();
        assert_eq!(ls_core::BenchmarkTrack::normalize(name).as_str(), name);
        assert_ne!(t["label"], "Case Track", "{name}");
    }
}

#[test]
fn the_grade_page_explains_every_result_class_the_grader_returns() {
    let grade = ASSETS.iter().find(|a| a.path == "js/grade.js").unwrap();
    let text = std::str::from_utf8(grade.body).unwrap();
    for class in ls_grading::result_class::RESULT_CLASSES {
        assert!(
            text.contains(&format!("  {class}: \"")),
            "grade.js does not explain {class}"
        );
    }
}
