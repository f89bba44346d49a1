"""Credentials of azure.identity: accepted and unused (fanout runs locally; docs/azure-sdk.md)."""


class _Credential:
    def __init__(self, *args, **kwargs):
        pass

    def get_token(self, *scopes, **kwargs):
        from _fanout_azure import note_ignored
        note_ignored("credential tokens", "fanout runs locally and needs none")
        return None


class DefaultAzureCredential(_Credential):
    pass


class InteractiveBrowserCredential(_Credential):
    pass


class AzureCliCredential(_Credential):
    pass


class ManagedIdentityCredential(_Credential):
    pass


class ClientSecretCredential(_Credential):
    pass


class DeviceCodeCredential(_Credential):
    pass
