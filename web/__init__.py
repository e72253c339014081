"""The member pages: documents and uploads, search, connected folders and the OneDrive
sign-in, the organisation a member works in. Thin callers of the services. A sibling
of `api` and `operations`: none of the three imports another.
"""
