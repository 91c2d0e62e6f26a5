//! `/dashboard/...`: a small web app for the people who look after Gatehouse. Its HTML, CSS and
//! JavaScript are compiled into the component, so it deploys with the edge or alone and reads
//! nothing from disk. The page holds no data: the script signs in with the API token (kept in
//! `sessionStorage`) and reads the public API with it, so these files are served without one.
//!
//! Every answer carries a strict content security policy (no inline script or style, no
//! framing), `nosniff` and `no-referrer`.

use gatehouse_http::{Access, ApiError, Params, Reply, Request, Response, Router};

gatehouse_http::component!(routes);

fn routes() -> Router<'static> {
    Router::new().get("/dashboard/...", Access::Open, asset)
}

/// The policy the page is written for: only its own script, style and API; no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
     connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The files, by the path under `/dashboard`.
fn file(path: &str) -> Option<(&'static str, &'static [u8])> {
    Some(match path {
        "/" | "/index.html" => ("text/html; charset=utf-8", include_bytes!("../assets/index.html")),
        "/app.js" => ("text/javascript; charset=utf-8", include_bytes!("../assets/app.js")),
        "/app.css" => ("text/css; charset=utf-8", include_bytes!("../assets/app.css")),
        _ => return None,
    })
}

async fn asset(_req: Request, params: Params) -> Result<Reply, ApiError> {
    let path = params.rest();
    // `/dashboard` itself: the page's relative links need the trailing slash.
    if path.is_empty() {
        return Ok(secure(Response::builder().status(308).header("location", "/dashboard/").body(Vec::new()).build()));
    }
    let (content_type, body) =
        file(path).ok_or_else(|| ApiError::not_found("The dashboard has no such page or file."))?;
    let response = Response::builder()
        .status(200)
        .header("content-type", content_type)
        // Small files that change with each release: revalidated rather than cached stale.
        .header("cache-control", "no-cache")
        .body(body.to_vec())
        .build();
    Ok(secure(response))
}

fn secure(mut response: Response) -> Reply {
    response.set_header("content-security-policy", CONTENT_SECURITY_POLICY);
    response.set_header("x-content-type-options", "nosniff");
    response.set_header("referrer-policy", "no-referrer");
    response.set_header("x-frame-options", "DENY");
    Reply::from(response)
}
