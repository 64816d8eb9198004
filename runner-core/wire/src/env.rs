//! A job's environment: the domain's [`Env`], whose values never show in `Debug`.

pub use drover_domain::env::Env;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SubmitJob;

    #[test]
    fn env_debug_shows_names_never_values() {
        let env = Env::from([("TOKEN".to_owned(), "s3cr3t-value".to_owned())]);
        let job = SubmitJob {
            runtime: "self:ws".into(),
            script: Some("true".into()),
            env: env.clone(),
            ..SubmitJob::default()
        };
        for shown in [format!("{env:?}"), format!("{job:?}"), format!("{job:#?}")] {
            assert!(shown.contains("TOKEN"), "{shown}");
            assert!(!shown.contains("s3cr3t"), "{shown}");
        }
        assert_eq!(format!("{env:?}"), r#"{"TOKEN": "***"}"#);
    }

    #[test]
    fn env_is_a_plain_json_object_on_the_wire() {
        let env: Env = serde_json::from_str(r#"{"A":"1","B":"2"}"#).unwrap();
        assert_eq!(env.get("B").map(String::as_str), Some("2"));
        assert_eq!(serde_json::to_string(&env).unwrap(), r#"{"A":"1","B":"2"}"#);
        let job: SubmitJob = serde_json::from_str(r#"{"runtime":"r","script":"x"}"#).unwrap();
        assert!(job.env.is_empty());
        assert!(!serde_json::to_string(&job).unwrap().contains("env"));
    }
}
