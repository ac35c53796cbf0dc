#[test]
fn api_versions_request() -> Result<()> {
    // the console producer's first request, captured off the wire
    let v = vec![
        0, 0, 0, 52, 0, 18, 0, 3, 0, 0, 0, 3, 0, 16, 99, 111, 110, 115, 111, 108, 101, 45, 112,
        114, 111, 100, 117, 99, 101, 114, 0, 18, 97, 112, 97, 99, 104, 101, 45, 107, 97, 102, 107,
        97, 45, 106, 97, 118, 97, 6, 51, 46, 54, 46, 49, 0,
    ];

    let frame = Frame::request_from_bytes(&v[..])?;
    assert_eq!(52, frame.size);
    assert_eq!(Some("3.6.1".into()), frame.client_software_version());
    Ok(())
}
