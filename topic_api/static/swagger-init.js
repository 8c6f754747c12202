/* Swagger UI at /docs: renders this API's own /openapi.json. A file, not an inline script:
 * the API's Content-Security-Policy runs scripts from this origin only. */
window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true });
