"""The envelope end to end: a success and a failure over loopback."""


async def test_me_get(sandbox):
    r = await sandbox.rpc("me.get")
    assert r.status == 200
    assert r.data["email"] == "owner@pro.example.test"


async def test_unknown_param_named(sandbox):
    r = await sandbox.rpc("forms.list", {"workspaceId": sandbox.pro.id, "limt": 5})
    r.expect("VALIDATION_ERROR", 400, reason="UNKNOWN_PARAM", field="limt")
    assert "limit" in r.details["validKeys"]
