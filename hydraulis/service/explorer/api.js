// Calls to the planning service's /v1 API. Every error the service returns has the shape
// {"error": {"code", "message", "field"}}; ApiError keeps the field so the page can show the
// message next to the input it names.

export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || null;
  }
}

// token: the bearer token typed into the page (sent as a header only, never in the URL).
export async function call(method, path, body, token) {
  const headers = {Accept: "application/json"};
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, {
      method, headers, body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "omit", cache: "no-store",
    });
  } catch (failure) {
    throw new ApiError(0, "unreachable", `the service did not answer (${failure.message})`, null);
  }
  const text = await response.text();
  let document = null;
  try {
    document = text ? JSON.parse(text) : null;
  } catch {
    document = null;
  }
  if (!response.ok) {
    const error = document && document.error;
    if (error) throw new ApiError(response.status, error.code, error.message, error.field);
    throw new ApiError(response.status, "http_error", `HTTP ${response.status}: ${text.slice(0, 200)}`, null);
  }
  return document;
}
